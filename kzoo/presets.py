"""Presets: the papers' model configurations by name, and preset directories.

A built-in preset is `presets/<family>/<name>.json` in the repository, installed
as `kzoo/_presets/<family>/<name>.json`, with the fields `name`, `family`,
`class_name`, `description`, `paper` (the section or table it reproduces) and
`config` (the constructor arguments of `class_name`). It gives an architecture;
its weights are random.

A preset directory holds saved models, tokenizers and preprocessors in
KerasHub's layout (see `kzoo.preset_directories`). `from_preset_for` is every
kzoo class's `from_preset`: it takes either a built-in name or a directory.
"""

import difflib
import functools
import importlib.resources
import json
import os
import warnings

import keras

from kzoo import preset_directories
from kzoo.preset_directories import (  # noqa: F401 (the saving API lives here too)
    load_task,
    save_preprocessor,
    save_tokenizer,
    saved_task_config,
)


@functools.lru_cache(maxsize=None)
def _load_all():
    """{name: preset dict} for every JSON file shipped in `kzoo._presets`."""
    root = importlib.resources.files("kzoo._presets")
    found = {}
    for family in sorted(root.iterdir(), key=lambda p: p.name):
        if not family.is_dir() or family.name.startswith(("_", ".")):
            continue
        for entry in sorted(family.iterdir(), key=lambda p: p.name):
            if entry.name.endswith(".json"):
                preset = json.loads(entry.read_text(encoding="utf-8"))
                found[preset["name"]] = preset
    return found


def list_presets(family=None):
    """Every built-in preset name with its one-line description.

    Args:
        family: optional model family ("bert", "transformer") to filter on.

    Returns:
        A dict `{name: description}`, sorted by name.

    Example:

    >>> presets = list_presets("bert")
    >>> presets["bert_base_uncased"]
    'BERT BASE (L=12, H=768, A=12), uncased 30522-token WordPiece vocabulary: 110M parameters (BERT sec. 3).'
    """
    return {
        name: preset["description"]
        for name, preset in sorted(_load_all().items())
        if family is None or preset["family"] == family
    }


def get_preset(name):
    """The preset dict for `name`; an unknown name raises a `ValueError` with close matches.

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
    """Instantiates `cls` from preset `name`, with `overrides` replacing config fields.

    Weights are random until the checkpoint issues land; a `UserWarning` says so.

    Example:

    >>> import warnings
    >>> from kzoo.models.bert.bert_backbone import BertBackbone
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     model = build_from_preset(BertBackbone, "bert_mini")
    >>> model.num_layers, model.hidden_dim, model.num_heads
    (4, 256, 4)
    """
    preset = get_preset(name)
    if preset["class_name"] != cls.__name__:
        raise ValueError(
            f"Preset {name!r} describes a {preset['class_name']}, not a {cls.__name__}: "
            "built-in presets hold architectures only (no vocabulary or weights yet). "
            f"Use kzoo.{preset['class_name']}.from_preset({name!r}), or pass a preset "
            "directory written by `save_to_preset`."
        )
    config = preset_directories.override_config(
        preset["config"], overrides, name, cls.__name__, extra=("dtype", "name")
    )
    warnings.warn(
        f"Preset {name!r} built with random weights: kzoo ships no pretrained "
        "weights for it yet. Load a checkpoint before using it for predictions.",
        UserWarning,
        stacklevel=4,
    )
    return cls(**config)


def from_preset_for(cls, preset, /, **kwargs):
    """A `cls` from a built-in preset name or a preset directory: the body of
    every kzoo `from_preset`.

    - A name (see `list_presets`) gives the architecture with random weights
      and a warning; `kwargs` override its config. A task class (one that
      takes a `backbone`) gets `cls(backbone=<the preset's backbone>, **kwargs)`,
      with `dtype` and the backbone's config fields (e.g. `max_sequence_length`)
      going to the backbone.
    - A directory (str or `os.PathLike`) written by `save_to_preset` loads the
      saved object and its weights (`kzoo.preset_directories.load`); a task
      class gets the saved task, or the saved backbone with a fresh head.

    - A BERT checkpoint in another format (a Hugging Face directory or
      `hf://owner/name`, a google-research directory or .zip, a KerasHub
      preset directory) is converted on the fly by
      `kzoo.models.bert.bert_checkpoints.load`.

    A name is looked up first: write `./bert_tiny` for a directory of that name.

    Example:

    >>> import tempfile
    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> path = tempfile.mkdtemp()
    >>> backbone.save_to_preset(path)
    >>> from_preset_for(BertBackbone, path).num_layers
    1
    >>> from_preset_for(BertBackbone, "bert_tinny")
    Traceback (most recent call last):
    ...
    ValueError: Unknown preset 'bert_tinny'. Did you mean: 'bert_tiny'... It is not a directory either: a preset directory must contain config.json (write one with `save_to_preset`).
    """
    if not _is_builtin_name(preset):
        from kzoo.models.bert import bert_checkpoints  # noqa: PLC0415 (imports the models)

        if bert_checkpoints.detect_format(preset) in bert_checkpoints.FORMATS:
            return bert_checkpoints.load(cls, preset, **kwargs)
        return preset_directories.load(cls, preset, **kwargs)
    if not preset_directories.takes_argument(cls, "backbone"):
        return build_from_preset(cls, preset, **kwargs)
    backbone_cls = keras.saving.get_registered_object(f"kzoo>{get_preset(preset)['class_name']}")
    backbone_kwargs = preset_directories.pop_backbone_kwargs(kwargs)
    for key in [k for k in kwargs if k in get_preset(preset)["config"] and not preset_directories.takes_argument(cls, k)]:
        backbone_kwargs[key] = kwargs.pop(key)  # e.g. max_sequence_length=128 for a task
    return cls(backbone=build_from_preset(backbone_cls, preset, **backbone_kwargs), **kwargs)


def save_backbone(backbone, path, format="kzoo"):
    """Writes a backbone as a kzoo preset directory (`format="kzoo"`, see
    `kzoo.preset_directories.save_backbone`) or, for BERT, a Hugging Face
    directory (`format="huggingface"`, see
    `kzoo.models.bert.bert_checkpoints.save_huggingface`).

    Example:

    >>> import os, tempfile
    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> path = tempfile.mkdtemp()
    >>> save_backbone(backbone, path, format="huggingface")
    >>> sorted(os.listdir(path))
    ['config.json', 'model.safetensors']
    """
    _save(preset_directories.save_backbone, backbone, path, format)


def save_task(task, path, format="kzoo"):
    """Writes a task model as a kzoo preset directory (`format="kzoo"`, see
    `kzoo.preset_directories.save_task`) or, for BERT tasks, a Hugging Face
    directory with the heads (`format="huggingface"`; a `kzoo.BertPretrainer`
    becomes a `BertForPreTraining`).

    Example:

    >>> import json, os, tempfile
    >>> from kzoo import BertBackbone, BertPretrainer
    >>> model = BertPretrainer(BertBackbone(vocabulary_size=50, num_layers=1,
    ...     num_heads=2, hidden_dim=8, intermediate_dim=16))
    >>> path = tempfile.mkdtemp()
    >>> save_task(model, path, format="huggingface")
    >>> with open(os.path.join(path, "config.json")) as f:
    ...     json.load(f)["architectures"]
    ['BertForPreTraining']
    """
    _save(preset_directories.save_task, task, path, format)


def _save(save_kzoo, model, path, format):
    from kzoo.models.bert import bert_checkpoints  # noqa: PLC0415 (imports the models)

    if format == "kzoo":
        save_kzoo(model, path)
    elif format == "huggingface":
        bert_checkpoints.save_huggingface(model, path)
    else:
        raise ValueError(
            f"Unknown preset format {format!r}: save_to_preset writes {list(bert_checkpoints.EXPORT_FORMATS)}."
        )


def _is_builtin_name(preset):
    """True for a built-in name, False for a directory or anything written as a
    path (`load` reports a missing one); otherwise a `ValueError` with close names."""
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
