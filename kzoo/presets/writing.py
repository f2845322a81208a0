"""Writing kzoo preset directories: a backbone, tokenizer, preprocessor or task
saved as data in KerasHub's layout (file names in `kzoo.presets.directory`).

A new or empty directory, or one that holds only preset files (which are
overwritten), is accepted; a directory with anything else in it is refused,
and so is saving a single part into a directory that holds a task (its task
weights would go stale): re-save the whole task there instead. Everything is
serialized and checked before the first file is written, and the directory is
written beside its destination and renamed into place
(`kzoo.presets.atomic`): a save that fails at any point leaves the previous
one as it was.
"""

import datetime
import json
import math
import os

import keras

from kzoo.presets import atomic
from kzoo.presets.directory import (
    METADATA_FILE,
    PART_FILES,
    PRESET_ENTRIES,
    TASK_FILE,
    TRAINING_CURVES_FILE,
    VOCABULARY_FILE,
    WEIGHTS_FILES,
    as_path,
    read_part,
)
from kzoo.presets.weights import save_weights, weight_shapes
from kzoo.version import __version__

ROLES = tuple(PART_FILES)


def role_of(obj):
    """The part of a preset `obj` is: "task", "backbone", "preprocessor" or "tokenizer".

    A `keras.Model` whose `backbone` attribute is a `keras.Model` is a task,
    any other `keras.Model` a backbone; an object with a `tokenizer` is a
    preprocessor, anything else a tokenizer.

    Args:
        obj: object. What to save.

    Returns:
        One of `ROLES`.

    Example:

    >>> from kzoo import BertBackbone, BertClassifier, BertPreprocessor, BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"])
    >>> backbone = BertBackbone(vocabulary_size=6, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> [role_of(obj) for obj in (BertClassifier(backbone, num_classes=2), backbone,
    ...                           BertPreprocessor(tokenizer), tokenizer)]
    ['task', 'backbone', 'preprocessor', 'tokenizer']
    """
    if isinstance(obj, keras.Model):
        return "task" if isinstance(getattr(obj, "backbone", None), keras.Model) else "backbone"
    return "preprocessor" if getattr(obj, "tokenizer", None) is not None else "tokenizer"


def save_directory(obj, path, tokenizer=None):
    """Writes `obj` as a kzoo preset directory at `path`, with every part it
    holds: the kzoo format's writer (see `kzoo.presets.save`).

    - a backbone: `config.json`, `model.weights.h5`;
    - a tokenizer: `tokenizer.json` and its vocabulary,
      `assets/tokenizer/vocabulary.txt`;
    - a preprocessor: `preprocessor.json` and its tokenizer;
    - a task (a `keras.Model` with a `backbone`): `task.json` and
      `task.weights.h5` (all its weights), its backbone, and its
      `.preprocessor` (or `.tokenizer`) when it has one; preset files the
      task does not have are removed.

    `metadata.json` describes the directory as it then is. The whole
    directory is written at once: a save that fails leaves the previous one.

    Args:
        obj: object. What to save; its part is `role_of(obj)`.
        path: str or os.PathLike. A new or empty directory, or a preset
            directory.
        tokenizer: a tokenizer saved with a backbone, in the same write.
            Defaults to `None`.

    Example:

    >>> import os, tempfile, keras
    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> logits = keras.layers.Dense(2)(backbone(backbone.input)["pooled_output"])
    >>> task = keras.Model(backbone.input, logits)
    >>> task.backbone = backbone
    >>> path = tempfile.mkdtemp()
    >>> save_directory(task, path)
    >>> sorted(os.listdir(path))
    ['config.json', 'metadata.json', 'model.weights.h5', 'task.json', 'task.weights.h5']
    """
    role = role_of(obj)
    if tokenizer is not None and role != "backbone":
        raise ValueError(f"save_directory(..., tokenizer=...) adds a tokenizer to a backbone; got a {role}.")
    if role == "task":
        preprocessor = getattr(obj, "preprocessor", None)
        tokenizer = getattr(preprocessor, "tokenizer", getattr(obj, "tokenizer", None))
        parts = {"task": obj, "backbone": obj.backbone, "preprocessor": preprocessor, "tokenizer": tokenizer}
    elif role == "preprocessor":
        parts = {"preprocessor": obj, "tokenizer": obj.tokenizer}
    elif tokenizer is not None:
        parts = {"backbone": obj, "tokenizer": tokenizer}
    else:
        parts = {role: obj}
    _write_parts(path, {role: part for role, part in parts.items() if part is not None})


def _write_parts(path, parts):
    """Serializes every part (checking them), then writes their files into a
    scratch copy of the directory, renamed into place once complete."""
    assets = {}
    configs = {PART_FILES[role]: _serialize(part, assets) for role, part in parts.items()}
    directory = _check_directory(path, saving_task="task" in parts)
    weights = {WEIGHTS_FILES[role]: parts[role] for role in WEIGHTS_FILES.keys() & parts.keys()}
    written = {*configs, *weights, METADATA_FILE}
    # A task's directory describes that task alone (its training curves kept); a part joins the others.
    existing = set(os.listdir(directory)) if os.path.isdir(directory) else set()
    kept = sorted(existing & {TRAINING_CURVES_FILE} if "task" in parts else existing - written)
    with atomic.replacing_directory(directory, keep=kept) as scratch:
        for relative, text in assets.items():
            os.makedirs(os.path.dirname(os.path.join(scratch, relative)), exist_ok=True)
            with open(os.path.join(scratch, relative), "w", encoding="utf-8", newline="") as f:
                f.write(text)
        for name, config in configs.items():
            with open(os.path.join(scratch, name), "w", encoding="utf-8") as f:
                json.dump(config, f, indent=4)
        for name, model in weights.items():
            save_weights(model, os.path.join(scratch, name))
        _write_metadata(scratch)


def _serialize(part, assets):
    """`serialize_keras_object(part)` with the vocabulary moved into `assets`
    ({relative path: text}) and a nested preprocessor/tokenizer referencing it."""
    config = _without_build_state(keras.saving.serialize_keras_object(part))
    for key in ("preprocessor", "tokenizer"):
        nested = getattr(part, key, None)
        if nested is not None and isinstance(config["config"].get(key), dict):
            config["config"][key] = _serialize(nested, assets)
    if "vocabulary" in config["config"] and hasattr(part, "get_vocabulary"):
        tokens = part.get_vocabulary()
        bad = [t for t in tokens if "\n" in t or t.endswith("\r")]
        if bad:
            raise ValueError(
                f"Cannot write the vocabulary as one token per line: token(s) {bad[:3]!r} "
                "contain a line break. Remove line breaks from the vocabulary first."
            )
        assets[VOCABULARY_FILE] = "".join(f"{token}\n" for token in tokens)
        config["config"]["vocabulary"] = VOCABULARY_FILE
    return config


def _without_build_state(config):
    """The config without `build_config` / `compile_config` (as KerasHub saves it)."""
    if isinstance(config, dict):
        return {
            key: _without_build_state(value)
            for key, value in config.items()
            if key not in ("build_config", "compile_config")
        }
    return config


def _check_directory(path, saving_task):
    directory = as_path(path)
    atomic.recover(directory)  # a save killed while replacing it
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise ValueError(f"Cannot save a preset to {directory!r}: it is a file. Pass a directory path.")
    entries = set(os.listdir(directory)) if os.path.isdir(directory) else set()
    foreign = sorted(entries - PRESET_ENTRIES)
    if foreign:
        raise ValueError(
            f"Refusing to save a preset into {directory!r}: it holds {foreign[:5]}, which are "
            "not preset files. Save into a new or empty directory (an existing preset "
            "directory is fine: only its preset files are overwritten)."
        )
    if TASK_FILE in entries and not saving_task:
        raise ValueError(
            f"{directory!r} holds a saved task (task.json, task.weights.h5), which would no "
            "longer match a part saved on its own. Re-save the whole task there with "
            "`task.save_to_preset(path)`, or save into a new directory."
        )
    return directory


def _write_metadata(directory):
    """metadata.json: describes the directory as it now is (KerasHub's metadata, plus
    kzoo's version, the backend and every part's class)."""
    metadata = {
        "kzoo_version": __version__,
        "keras_version": keras.version(),
        "backend": keras.backend.backend(),
        "date_saved": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "classes": {
            role: read_part(directory, name)["class_name"]
            for role, name in PART_FILES.items()
            if os.path.isfile(os.path.join(directory, name))
        },
    }
    for role, name in WEIGHTS_FILES.items():
        if os.path.isfile(os.path.join(directory, name)):
            shapes = weight_shapes(os.path.join(directory, name))
            key = "parameter_count" if role == "backbone" else f"{role}_parameter_count"
            metadata[key] = sum(math.prod(shape) for shape in shapes.values())
    with open(os.path.join(directory, METADATA_FILE), "w", encoding="utf-8") as f:
        json.dump(metadata, f, indent=4)
