"""Preset directories: a backbone, its tokenizer, preprocessor and task saved as data.

BERT sec. 3: fine-tuning "is first initialized with the pre-trained parameters";
a preset directory is how those parameters, with the vocabulary and packing that
produced them, travel from one run (or backend) to the next. The file names are
those of KerasHub's `keras_hub/src/utils/preset_utils.py`:

    config.json                      the backbone, `keras.saving.serialize_keras_object`
    model.weights.h5                 the backbone's weights
    tokenizer.json                   the tokenizer; `vocabulary` is the asset below
    assets/tokenizer/vocabulary.txt  one token per line
    preprocessor.json                the preprocessor, its tokenizer referenced the same way
    task.json                        a task model (backbone + head), preprocessor referenced
    task.weights.h5                  all of the task's weights (backbone included)
    metadata.json                    kzoo and Keras versions, backend, classes, parameters, date

Any JSON string that begins with `assets/` is a path relative to the directory,
so a directory can be moved or copied. Weights files hold no optimizer state.

Saving: a new or empty directory, or one that holds only preset files (which are
overwritten), is accepted; a directory with anything else in it is refused, and
so is saving a single part into a directory that holds a task (its task weights
would go stale): re-save the whole task there instead. Everything is serialized
and checked before the first file is written.
"""

import collections
import datetime
import importlib
import inspect
import json
import math
import os
import shutil
import tempfile

import h5py
import keras

CONFIG_FILE = "config.json"
TOKENIZER_FILE = "tokenizer.json"
PREPROCESSOR_FILE = "preprocessor.json"
TASK_FILE = "task.json"
METADATA_FILE = "metadata.json"
MODEL_WEIGHTS_FILE = "model.weights.h5"
TASK_WEIGHTS_FILE = "task.weights.h5"
ASSET_DIR = "assets"
VOCABULARY_FILE = f"{ASSET_DIR}/tokenizer/vocabulary.txt"

# Each part of a preset: its JSON file, and its weights file for models.
PART_FILES = {
    "task": TASK_FILE,
    "backbone": CONFIG_FILE,
    "preprocessor": PREPROCESSOR_FILE,
    "tokenizer": TOKENIZER_FILE,
}
WEIGHTS_FILES = {"task": TASK_WEIGHTS_FILE, "backbone": MODEL_WEIGHTS_FILE}
PRESET_ENTRIES = {*PART_FILES.values(), *WEIGHTS_FILES.values(), METADATA_FILE, ASSET_DIR}
# Task keyword arguments forwarded to the backbone (as KerasHub does).
BACKBONE_KWARGS = ("dtype",)
RESAVE = "Re-save the preset with `save_to_preset(path)`"


# === Saving ===


def save_backbone(backbone, path):
    """Writes `config.json`, `model.weights.h5` and `metadata.json`.

    Example:

    >>> import os, tempfile
    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> path = os.path.join(tempfile.mkdtemp(), "tiny")
    >>> save_backbone(backbone, path)
    >>> sorted(os.listdir(path))
    ['config.json', 'metadata.json', 'model.weights.h5']
    """
    _save_parts(path, {"backbone": backbone})


def save_tokenizer(tokenizer, path):
    """Writes `tokenizer.json` and its vocabulary, `assets/tokenizer/vocabulary.txt`.

    Example:

    >>> import os, tempfile
    >>> from kzoo import BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"])
    >>> path = tempfile.mkdtemp()
    >>> save_tokenizer(tokenizer, path)
    >>> sorted(os.listdir(path)), os.listdir(os.path.join(path, "assets", "tokenizer"))
    (['assets', 'metadata.json', 'tokenizer.json'], ['vocabulary.txt'])
    """
    _save_parts(path, {"tokenizer": tokenizer})


def save_preprocessor(preprocessor, path):
    """Writes `preprocessor.json` and its tokenizer.

    Example:

    >>> import os, tempfile
    >>> from kzoo import BertPreprocessor, BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"])
    >>> path = tempfile.mkdtemp()
    >>> save_preprocessor(BertPreprocessor(tokenizer, sequence_length=8), path)
    >>> sorted(os.listdir(path))
    ['assets', 'metadata.json', 'preprocessor.json', 'tokenizer.json']
    """
    _save_parts(path, {"preprocessor": preprocessor, "tokenizer": preprocessor.tokenizer})


def save_task(task, path):
    """Writes a task model: `task.json` and `task.weights.h5` (all its weights),
    its `.backbone` as `config.json` + `model.weights.h5`, its `.preprocessor`
    (or `.tokenizer`) when it has one, and `metadata.json`; preset files the task
    does not have are removed. A task's `save_to_preset(path)` calls this.

    `task` is any `keras.Model` with a `backbone` attribute whose `get_config`
    serializes it (and its `preprocessor`, if any) with
    `keras.saving.serialize_keras_object`.

    Example:

    >>> import os, tempfile, keras
    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> logits = keras.layers.Dense(2)(backbone(backbone.input)["pooled_output"])
    >>> task = keras.Model(backbone.input, logits)
    >>> task.backbone = backbone
    >>> path = tempfile.mkdtemp()
    >>> save_task(task, path)
    >>> sorted(os.listdir(path))
    ['config.json', 'metadata.json', 'model.weights.h5', 'task.json', 'task.weights.h5']
    """
    backbone = getattr(task, "backbone", None)
    if not isinstance(task, keras.Model) or not isinstance(backbone, keras.Model):
        raise ValueError(
            f"save_task saves a keras.Model with a `backbone` attribute (a keras.Model); "
            f"got a {type(task).__name__} whose backbone is {type(backbone).__name__}. "
            "Save a bare backbone with `save_backbone`."
        )
    preprocessor = getattr(task, "preprocessor", None)
    tokenizer = getattr(preprocessor, "tokenizer", getattr(task, "tokenizer", None))
    parts = {"task": task, "backbone": backbone, "preprocessor": preprocessor, "tokenizer": tokenizer}
    _save_parts(path, {role: part for role, part in parts.items() if part is not None})


def _save_parts(path, parts):
    """Serializes every part (checking them), then writes their files."""
    assets = {}
    configs = {PART_FILES[role]: _serialize(part, assets) for role, part in parts.items()}
    directory = _prepare_directory(path, saving_task="task" in parts)
    if "task" in parts:  # the directory describes this task alone
        _remove_other_parts(directory, parts, assets)
    for relative, text in assets.items():
        os.makedirs(os.path.dirname(os.path.join(directory, relative)), exist_ok=True)
        with open(os.path.join(directory, relative), "w", encoding="utf-8", newline="") as f:
            f.write(text)
    for name, config in configs.items():
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            json.dump(config, f, indent=4)
    for role in WEIGHTS_FILES.keys() & parts.keys():
        _save_weights(parts[role], os.path.join(directory, WEIGHTS_FILES[role]))
    _write_metadata(directory)


def _remove_other_parts(directory, parts, assets):
    """Deletes the preset files of parts not in `parts` (left by an earlier save)."""
    for role in PART_FILES.keys() - parts.keys():
        for name in (PART_FILES[role], WEIGHTS_FILES.get(role)):
            if name and os.path.exists(os.path.join(directory, name)):
                os.remove(os.path.join(directory, name))
    if not assets:
        shutil.rmtree(os.path.join(directory, ASSET_DIR), ignore_errors=True)


def _save_weights(model, path):
    """The model's weights, without its optimizer's state."""
    optimizer = getattr(model, "optimizer", None)  # set by `compile`
    skip = [optimizer] if optimizer is not None else None
    keras.saving.save_weights(model, path, objects_to_skip=skip)


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


def _prepare_directory(path, saving_task):
    directory = _as_path(path)
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
    os.makedirs(directory, exist_ok=True)
    return directory


def _write_metadata(directory):
    """metadata.json: describes the directory as it now is (KerasHub's metadata, plus
    kzoo's version, the backend and every part's class)."""
    from kzoo import __version__  # noqa: PLC0415 (kzoo imports this module)

    metadata = {
        "kzoo_version": __version__,
        "keras_version": keras.version(),
        "backend": keras.backend.backend(),
        "date_saved": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "classes": {
            role: _read_json(directory, name)["class_name"]
            for role, name in PART_FILES.items()
            if os.path.isfile(os.path.join(directory, name))
        },
    }
    for role, name in WEIGHTS_FILES.items():
        if os.path.isfile(os.path.join(directory, name)):
            shapes = _weight_shapes(os.path.join(directory, name))
            key = "parameter_count" if role == "backbone" else f"{role}_parameter_count"
            metadata[key] = sum(math.prod(shape) for shape in shapes.values())
    with open(os.path.join(directory, METADATA_FILE), "w", encoding="utf-8") as f:
        json.dump(metadata, f, indent=4)


# === Loading ===


def load(cls, path, /, **kwargs):
    """Loads the part of a preset directory that is a `cls`; `kwargs`
    override its config.

    A class that takes a `backbone` argument is a task, loaded by `load_task`.
    Otherwise the first of task.json, config.json, preprocessor.json and
    tokenizer.json that holds a `cls` (or a subclass) is loaded, with its
    weights for models. `kzoo.presets.from_preset_for` calls this for a path.

    Example:

    >>> import tempfile
    >>> from kzoo import BertTokenizer
    >>> path = tempfile.mkdtemp()
    >>> BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"]).save_to_preset(path)
    >>> load(BertTokenizer, path, lowercase=False).lowercase
    False
    """
    if takes_argument(cls, "backbone"):
        return load_task(cls, path, **kwargs)
    directory = _preset_directory(path)
    saved = _saved_classes(directory)
    for role in PART_FILES:
        if _is_subclass(saved.get(role), cls):
            return _load_part(directory, role, kwargs)
    raise ValueError(
        f"{directory!r} holds no {cls.__name__}: it has "
        + ", ".join(f"{PART_FILES[role]} ({config['class_name']})" for role, config in saved.items())
        + ". Load those with their own classes' `from_preset`, or save a "
        f"{cls.__name__} there with `save_to_preset`."
    )


def load_task(cls, path, /, **kwargs):
    """A task model `cls` from a preset directory: a backbone's parameters,
    then a head.

    If task.json holds a `cls`, the task is rebuilt from it (`kwargs` override
    its config) with all of task.weights.h5. Otherwise (a backbone alone, or
    another task such as a pre-trainer) it is `cls(backbone=..., **kwargs)`: the
    backbone from config.json + model.weights.h5, a fresh head, and the
    directory's preprocessor (or tokenizer) when `cls` takes one and `kwargs`
    do not give it. A `dtype` goes to the backbone.

    Example:

    >>> import os, tempfile, keras
    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> logits = keras.layers.Dense(3)(backbone(backbone.input)["pooled_output"])
    >>> task = keras.Model(backbone.input, logits)
    >>> task.backbone = backbone
    >>> path = tempfile.mkdtemp()
    >>> save_task(task, path)
    >>> load_task(keras.Model, path).output.shape
    (None, 3)
    """
    directory = _preset_directory(path)
    saved = _saved_classes(directory)
    if _is_subclass(saved.get("task"), cls):
        return _load_part(directory, "task", kwargs)
    if "backbone" not in saved:
        raise ValueError(
            f"{directory!r} has no config.json: a {cls.__name__} needs a saved backbone "
            f"(config.json and model.weights.h5). {RESAVE}."
        )
    kwargs["backbone"] = _load_part(directory, "backbone", pop_backbone_kwargs(kwargs))
    wanted = next((a for a in ("preprocessor", "tokenizer") if takes_argument(cls, a)), None)
    role = next((r for r in ("preprocessor", "tokenizer") if r in saved), None)
    if wanted and role and wanted not in kwargs:
        part = _load_part(directory, role, {})
        # A task adapts a tokenizer into its own preprocessor; a pre-trainer keeps the tokenizer.
        kwargs[wanted] = part.tokenizer if (wanted, role) == ("tokenizer", "preprocessor") else part
    return cls(**kwargs)


def saved_task_config(path, cls):
    """The config of the `cls` task saved in preset directory `path`, or None
    (a built-in name, or no such task there), e.g. to compare a fine-tuned
    head's `num_classes` with the one asked for.

    >>> saved_task_config("bert_tiny", object) is None
    True
    """
    if not isinstance(path, (str, os.PathLike)) or not os.path.isdir(os.path.expanduser(os.fspath(path))):
        return None
    directory = _as_path(path)
    # Only task.json is read: config.json may belong to another format (a Hugging Face checkpoint).
    config = _read_json(directory, TASK_FILE) if os.path.isfile(os.path.join(directory, TASK_FILE)) else None
    return dict(config["config"]) if _is_subclass(config, cls) else None


def pop_backbone_kwargs(kwargs):
    """Removes and returns the task arguments that belong to its backbone
    (`dtype`, as in KerasHub), so a fine-tuned model runs in
    the precision asked for.

    >>> kwargs = {"num_classes": 2, "dtype": "bfloat16"}
    >>> pop_backbone_kwargs(kwargs), kwargs
    ({'dtype': 'bfloat16'}, {'num_classes': 2})
    """
    return {key: kwargs.pop(key) for key in BACKBONE_KWARGS if key in kwargs}


def takes_argument(cls, name):
    """Whether `cls(...)` has a parameter `name`: a task takes a `backbone`,
    and maybe a `preprocessor`.

    >>> from kzoo import BertPreprocessor
    >>> takes_argument(BertPreprocessor, "tokenizer"), takes_argument(BertPreprocessor, "backbone")
    (True, False)
    """
    return name in inspect.signature(cls.__init__).parameters


def override_config(config, overrides, source, class_name, extra=()):
    """`config` updated with `overrides`, each of which must be a key of `config`
    or in `extra` (e.g. BERT's L, H, A as `num_layers`, `hidden_dim`, `num_heads`).

    >>> override_config({"num_layers": 2}, {"num_layers": 4}, "bert_tiny", "BertBackbone")
    {'num_layers': 4}
    >>> override_config({"num_layers": 2}, {"layers": 4}, "bert_tiny", "BertBackbone")
    Traceback (most recent call last):
    ...
    ValueError: Unknown override(s) ['layers'] for preset 'bert_tiny'; BertBackbone presets take: ['num_layers'].
    """
    unknown = set(overrides) - set(config) - set(extra)
    if unknown:
        raise ValueError(
            f"Unknown override(s) {sorted(unknown)} for preset {source!r}; "
            f"{class_name} presets take: {sorted(set(config) | set(extra))}."
        )
    return {**config, **overrides}


def _load_part(directory, role, overrides):
    """Deserializes a part's JSON (asset paths made absolute, `overrides`
    applied) and loads its weights if it has some."""
    config = _read_json(directory, PART_FILES[role])
    inner = dict(config["config"])
    backbone = inner.get("backbone")
    if role == "task" and isinstance(backbone, dict):
        backbone_config = {**backbone["config"], **pop_backbone_kwargs(overrides)}
        inner["backbone"] = {**backbone, "config": backbone_config}
    inner = override_config(inner, overrides, directory, config["class_name"])
    part = keras.saving.deserialize_keras_object(
        _with_asset_paths({**config, "config": inner}, directory, PART_FILES[role])
    )
    if role in WEIGHTS_FILES:
        _load_weights(part, os.path.join(directory, WEIGHTS_FILES[role]), PART_FILES[role])
    return part


def _with_asset_paths(config, directory, name):
    """`config` with every "assets/..." string made an absolute path."""
    if isinstance(config, dict):
        return {key: _with_asset_paths(value, directory, name) for key, value in config.items()}
    if isinstance(config, list):
        return [_with_asset_paths(value, directory, name) for value in config]
    if isinstance(config, str) and config.startswith(ASSET_DIR + "/"):
        path = os.path.join(directory, *config.split("/"))
        if not os.path.isfile(path):
            raise ValueError(f"{name} in {directory!r} refers to {config}, which is missing. {RESAVE}.")
        return path
    return config


def _load_weights(model, path, described_by):
    """`model.load_weights(path)`, after checking the file is readable and its
    variables have the shapes of `model` (Keras ignores a file's extra layers)."""
    if not os.path.isfile(path):
        raise ValueError(
            f"The weights file {path!r} is missing: the preset has {described_by} but no "
            f"{os.path.basename(path)}. {RESAVE}, or copy the whole directory again."
        )
    found = _weight_shapes(path)
    expected = collections.Counter(tuple(w.shape) for w in model.weights)
    if collections.Counter(found.values()) != expected:
        differences = _shape_differences(model, found)
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


def _weight_shapes(path):
    """{variable path in the file: shape}, optimizer state left out."""
    shapes = {}

    def visit(name, item):
        if isinstance(item, h5py.Dataset) and not name.startswith("optimizer/"):
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


def _shape_differences(model, found):
    """One line per variable whose shape differs between `model` and the file."""
    with tempfile.TemporaryDirectory() as scratch:
        reference = os.path.join(scratch, "reference.weights.h5")
        _save_weights(model, reference)
        expected = _weight_shapes(reference)
    return [
        f"variable {name!r}: "
        + (f"expected shape {expected[name]}" if name in expected else "not in the model")
        + (f", found {found[name]}" if name in found else ", not in the file")
        for name in sorted(expected.keys() | found.keys())
        if expected.get(name) != found.get(name)
    ]


# === Directory contents ===


def _as_path(path):
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"A preset directory is a str or os.PathLike path; got {type(path).__name__}.")
    return os.path.expanduser(os.fspath(path))


def _preset_directory(path):
    directory = _as_path(path)
    if not os.path.isdir(directory):
        raise ValueError(
            f"Preset directory {directory!r} does not exist. A preset directory must contain "
            "config.json; write one with `save_to_preset(path)`."
        )
    if not any(os.path.isfile(os.path.join(directory, name)) for name in PART_FILES.values()):
        raise ValueError(
            f"{directory!r} is not a preset directory: it has no config.json (nor tokenizer.json, "
            "preprocessor.json or task.json). Write one with `save_to_preset(path)`."
        )
    return directory


def _read_json(directory, name):
    path = os.path.join(directory, name)
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path!r} is not valid JSON ({error}). {RESAVE}.") from error
    if not isinstance(config, dict) or "class_name" not in config or "config" not in config:
        raise ValueError(
            f"{path!r} is not a serialized Keras object (no class_name/config). {RESAVE}."
        )
    return config


def _saved_classes(directory):
    """{role: its JSON} for the parts the directory holds."""
    return {
        role: _read_json(directory, name)
        for role, name in PART_FILES.items()
        if os.path.isfile(os.path.join(directory, name))
    }


def _is_subclass(config, cls):
    """Whether a part's JSON describes a `cls` (a registered class or a subclass)."""
    if config is None:
        return False
    saved = keras.saving.get_registered_object(config.get("registered_name") or config["class_name"])
    module = config.get("module") or ""
    if saved is None and module.split(".")[0] in ("keras", "kzoo"):  # built-in classes
        try:
            saved = getattr(importlib.import_module(module), config["class_name"], None)
        except ImportError:
            saved = None
    return inspect.isclass(saved) and issubclass(saved, cls)
