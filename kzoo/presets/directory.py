"""kzoo preset directories (format "kzoo") in the layout of KerasHub's `preset_utils.py`,
read with every weight's shape checked, written atomically (`kzoo.atomic`): `config.json`,
`model.weights.h5`, `tokenizer.json` (+ `assets/`), `preprocessor.json`, `task.json`,
`task.weights.h5`, `metadata.json`, and the `kzoo` command's `training_curves.png`."""

import collections
import datetime
import importlib
import inspect
import json
import math
import os
import tempfile

import h5py
import keras

from kzoo import atomic
from kzoo.checkpoints.bert_weights import pop_backbone_kwargs, takes_argument, tokenizer_argument
from kzoo.checkpoints.huggingface import local_path
from kzoo.layers import lora
from kzoo.layers.dropout import SEED_STATE
from kzoo.version import __version__

# Each part of a preset (its role): its JSON file, and its weights file for models.
PART_FILES = {
    "task": "task.json", "backbone": "config.json", "preprocessor": "preprocessor.json", "tokenizer": "tokenizer.json",
}
WEIGHTS_FILES = {"task": "task.weights.h5", "backbone": "model.weights.h5"}
METADATA_FILE = "metadata.json"
ASSET_DIR = "assets"
VOCABULARY_FILE = f"{ASSET_DIR}/tokenizer/vocabulary.txt"
TRAINING_CURVES_FILE = "training_curves.png"
PRESET_ENTRIES = {*PART_FILES.values(), *WEIGHTS_FILES.values(), METADATA_FILE, ASSET_DIR, TRAINING_CURVES_FILE}
RESAVE = "Re-save the preset with `save_to_preset(path)`"


def override_config(config, overrides, source, class_name, extra=()):
    """`config` updated with `overrides`, each a field of `config` or `extra`."""
    unknown = set(overrides) - set(config) - set(extra)
    if unknown:
        raise ValueError(
            f"Unknown override(s) {sorted(unknown)} for preset {source!r}; "
            f"{class_name} presets take: {sorted(set(config) | set(extra))}."
        )
    return {**config, **overrides}


def load_directory(cls, path, /, **kwargs):
    """The `cls` part of a preset directory with its weights, `kwargs` overriding its config."""
    if takes_argument(cls, "backbone"):
        return load_task(cls, path, **kwargs)
    directory, saved = _open(path)
    for role in PART_FILES:
        if _describes(saved.get(role), cls):
            return _read_part(directory, role, kwargs)
    raise ValueError(
        f"{directory!r} holds no {cls.__name__}: it has "
        + ", ".join(f"{PART_FILES[role]} ({config['class_name']})" for role, config in saved.items())
        + f". Load those with their own classes' `from_preset`, or save a {cls.__name__} there with `save_to_preset`."
    )


def load_task(cls, path, /, **kwargs):
    """The saved `cls` task, else `cls(backbone=<saved backbone>, **kwargs)` with the saved preprocessor."""
    directory, saved = _open(path)
    if _describes(saved.get("task"), cls):
        return _read_part(directory, "task", kwargs)
    if "backbone" not in saved:
        raise ValueError(
            f"{directory!r} has no config.json: a {cls.__name__} needs a saved backbone "
            f"(config.json and model.weights.h5). {RESAVE}."
        )
    kwargs["backbone"] = _read_part(directory, "backbone", pop_backbone_kwargs(kwargs))
    wanted = tokenizer_argument(cls)
    role = next((r for r in ("preprocessor", "tokenizer") if r in saved), None)
    if wanted and role and wanted not in kwargs:
        part = _read_part(directory, role, {})
        # A task adapts a tokenizer into its own preprocessor; a pre-trainer keeps the tokenizer.
        kwargs[wanted] = part.tokenizer if (wanted, role) == ("tokenizer", "preprocessor") else part
    return cls(**kwargs)


def saved_task_config(path, cls):
    """The config of the `cls` task saved in preset directory `path`, else None
    (a name, another format, no such task): e.g. to compare a head's `num_classes`.

    Example:

    >>> saved_task_config("bert_tiny", object) is None
    True
    """
    atomic.recover(path)
    directory = local_path(path)
    # Only task.json is read: config.json may belong to another format (a Hugging Face checkpoint).
    found = directory is not None and os.path.isfile(os.path.join(directory, PART_FILES["task"]))
    config = _read_json(directory, PART_FILES["task"]) if found else None
    return dict(config["config"]) if _describes(config, cls) else None


def _as_path(path):
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"A preset directory is a str or os.PathLike path; got {type(path).__name__}.")
    return os.path.expanduser(os.fspath(path))


def _open(path):
    """(directory, {role: serialized object}) of a preset directory, checked to be one."""
    directory = _as_path(path)
    if not os.path.isdir(directory):
        raise ValueError(
            f"Preset directory {directory!r} does not exist. A preset directory must contain "
            "config.json; write one with `save_to_preset(path)`."
        )
    saved = {role: _read_json(directory, name) for role, name in PART_FILES.items()
             if os.path.isfile(os.path.join(directory, name))}
    if not saved:
        raise ValueError(
            f"{directory!r} is not a preset directory: it has no config.json (nor tokenizer.json, "
            "preprocessor.json or task.json). Write one with `save_to_preset(path)`."
        )
    return directory, saved


def _read_json(directory, name):
    path = os.path.join(directory, name)
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path!r} is not valid JSON ({error}). {RESAVE}.") from error
    if not isinstance(config, dict) or "class_name" not in config or "config" not in config:
        raise ValueError(f"{path!r} is not a serialized Keras object (no class_name/config). {RESAVE}.")
    return config


def _describes(config, cls):
    """Whether a serialized object is a `cls` (found by registered name, or by module for Keras and kzoo)."""
    if config is None:
        return False
    saved = keras.saving.get_registered_object(config.get("registered_name") or config["class_name"])
    module = config.get("module") or ""
    if saved is None and module.split(".")[0] in ("keras", "kzoo"):
        try:
            saved = getattr(importlib.import_module(module), config["class_name"], None)
        except ImportError:
            saved = None
    return inspect.isclass(saved) and issubclass(saved, cls)


def _read_part(directory, role, overrides):
    """A part deserialized (asset paths made absolute, `overrides` applied), with its weights."""
    config = _read_json(directory, PART_FILES[role])
    inner = dict(config["config"])
    backbone = inner.get("backbone")
    if role == "task" and isinstance(backbone, dict):
        inner["backbone"] = {**backbone, "config": {**backbone["config"], **pop_backbone_kwargs(overrides)}}
    # Arguments the class gained after the preset was saved (e.g. label names) can be given too.
    cls = keras.saving.get_registered_object(config.get("registered_name") or config["class_name"])
    added = [name for name in overrides if cls is not None and takes_argument(cls, name)]
    inner = override_config(inner, overrides, directory, config["class_name"], extra=tuple(added))
    part = keras.saving.deserialize_keras_object(_with_asset_paths({**config, "config": inner}, directory, role))
    if role in WEIGHTS_FILES:
        _load_weights(part, os.path.join(directory, WEIGHTS_FILES[role]), PART_FILES[role])
    return part


def _with_asset_paths(config, directory, role):
    if isinstance(config, dict):
        return {key: _with_asset_paths(value, directory, role) for key, value in config.items()}
    if isinstance(config, list):
        return [_with_asset_paths(value, directory, role) for value in config]
    if isinstance(config, str) and config.startswith(ASSET_DIR + "/"):
        path = os.path.join(directory, *config.split("/"))
        if not os.path.isfile(path):
            raise ValueError(f"{PART_FILES[role]} in {directory!r} refers to {config}, which is missing. {RESAVE}.")
        return path
    return config


def _load_weights(model, path, described_by):
    """`model.load_weights(path)` after checking every shape (Keras ignores a file's extra layers)."""
    if not os.path.isfile(path):
        raise ValueError(
            f"The weights file {path!r} is missing: the preset has {described_by} but no "
            f"{os.path.basename(path)}. {RESAVE}, or copy the whole directory again."
        )
    found = weight_shapes(path)
    if collections.Counter(found.values()) != collections.Counter(tuple(w.shape) for w in lora.saved_weights(model)):
        with tempfile.TemporaryDirectory() as scratch:
            _save_weights(model, os.path.join(scratch, "reference.weights.h5"))
            expected = weight_shapes(os.path.join(scratch, "reference.weights.h5"))
        differences = [
            f"variable {name!r}: "
            + (f"expected shape {expected[name]}" if name in expected else "not in the model")
            + (f", found {found[name]}" if name in found else ", not in the file")
            for name in sorted(expected.keys() | found.keys()) if expected.get(name) != found.get(name)
        ]
        if differences:
            raise ValueError(
                f"The weights in {path!r} do not match the model {described_by} describes "
                f"({len(differences)} variable(s) differ):\n  " + "\n  ".join(differences[:5])
                + f"\nWas {described_by} edited, or overridden? Load it unchanged, or "
                "re-save the preset with `save_to_preset(path)`."
            )
    try:
        model.load_weights(path)
    except Exception as error:  # Keras reports damaged files in many ways
        raise ValueError(f"Could not load {path!r}: {error}. {RESAVE}.") from error


def weight_shapes(path):
    """`{variable path: shape}` of a `.weights.h5` file, less optimizer and seed state."""
    shapes = {}

    def visit(name, item):
        skipped = name.startswith(("optimizer/", lora.STATE_GROUP)) or name.endswith(SEED_STATE)
        if isinstance(item, h5py.Dataset) and not skipped:
            shapes[name] = tuple(item.shape)

    try:
        with h5py.File(path, "r") as f:
            f.visititems(visit)
    except (OSError, RuntimeError, KeyError, ValueError) as error:
        raise ValueError(
            f"Cannot read the weights file {path!r} ({error}): it is corrupt or truncated "
            f"(an interrupted save or copy?). {RESAVE}, or copy the file again."
        ) from error
    return shapes


def _save_weights(model, path):
    optimizer = getattr(model, "optimizer", None)  # set by `compile`; not part of a preset
    keras.saving.save_weights(model, path, objects_to_skip=[optimizer] if optimizer is not None else None)
    lora.append_state(model, path)


def role_of(obj):
    """"task" (its `backbone` a `keras.Model`), "backbone", "preprocessor" (has a `tokenizer`) or "tokenizer"."""
    if isinstance(obj, keras.Model):
        return "task" if isinstance(getattr(obj, "backbone", None), keras.Model) else "backbone"
    return "preprocessor" if getattr(obj, "tokenizer", None) is not None else "tokenizer"


def save_directory(obj, path, tokenizer=None):
    """Writes `obj` and every part it holds (`tokenizer`: beside a backbone) in one atomic write."""
    role = role_of(obj)
    if tokenizer is not None and role != "backbone":
        raise ValueError(f"save_directory(..., tokenizer=...) adds a tokenizer to a backbone; got a {role}.")
    if role == "task":
        preprocessor = getattr(obj, "preprocessor", None)
        tokenizer = getattr(preprocessor, "tokenizer", getattr(obj, "tokenizer", None))
        parts = {"task": obj, "backbone": obj.backbone, "preprocessor": preprocessor, "tokenizer": tokenizer}
    elif role == "preprocessor":
        parts = {"preprocessor": obj, "tokenizer": obj.tokenizer}
    else:
        parts = {role: obj} if tokenizer is None else {"backbone": obj, "tokenizer": tokenizer}
    parts = {role: part for role, part in parts.items() if part is not None}
    assets = {}
    configs = {PART_FILES[role]: _serialize(part, assets) for role, part in parts.items()}
    directory = _check_directory(path, saving_task="task" in parts)
    weights = {WEIGHTS_FILES[role]: parts[role] for role in WEIGHTS_FILES.keys() & parts.keys()}
    # A task's directory describes that task alone (its training curves kept); a part joins the others.
    existing = set(os.listdir(directory)) if os.path.isdir(directory) else set()
    kept = existing & {TRAINING_CURVES_FILE} if "task" in parts else existing - {*configs, *weights, METADATA_FILE}
    with atomic.replacing_directory(directory, keep=sorted(kept)) as scratch:
        for relative, text in {**assets, **{name: json.dumps(c, indent=4) for name, c in configs.items()}}.items():
            os.makedirs(os.path.dirname(os.path.join(scratch, relative)), exist_ok=True)
            with open(os.path.join(scratch, relative), "w", encoding="utf-8", newline="") as f:
                f.write(text)
        for name, model in weights.items():
            _save_weights(model, os.path.join(scratch, name))
        _write_metadata(scratch)


def _serialize(part, assets):
    """`part` serialized without build state, its vocabulary moved into `assets` ({path: text})."""
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
    if isinstance(config, dict):
        return {k: _without_build_state(v) for k, v in config.items() if k not in ("build_config", "compile_config")}
    return config


def _check_directory(path, saving_task):
    directory = _as_path(path)
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
    if PART_FILES["task"] in entries and not saving_task:
        raise ValueError(
            f"{directory!r} holds a saved task (task.json, task.weights.h5), which would no "
            "longer match a part saved on its own. Re-save the whole task there with "
            "`task.save_to_preset(path)`, or save into a new directory."
        )
    return directory


def _write_metadata(directory):
    """metadata.json: KerasHub's fields, kzoo's version, the backend and every part's class."""
    metadata = {"kzoo_version": __version__, "keras_version": keras.version(), "backend": keras.backend.backend(),
                "date_saved": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "classes": {role: config["class_name"] for role, config in _open(directory)[1].items()}}
    for role, name in WEIGHTS_FILES.items():
        if os.path.isfile(os.path.join(directory, name)):
            count = sum(math.prod(shape) for shape in weight_shapes(os.path.join(directory, name)).values())
            metadata["parameter_count" if role == "backbone" else f"{role}_parameter_count"] = count
    with open(os.path.join(directory, METADATA_FILE), "w", encoding="utf-8") as f:
        json.dump(metadata, f, indent=4)
