"""The layout of a kzoo preset directory, and reading what it holds.

The file names are those of KerasHub's `keras_hub/src/utils/preset_utils.py`:

    config.json                      the backbone, `keras.saving.serialize_keras_object`
    model.weights.h5                 the backbone's weights
    tokenizer.json                   the tokenizer; `vocabulary` is the asset below
    assets/tokenizer/vocabulary.txt  one token per line
    preprocessor.json                the preprocessor, its tokenizer referenced the same way
    task.json                        a task model (backbone + head), preprocessor referenced
    task.weights.h5                  all of the task's weights (backbone included)
    metadata.json                    kzoo and Keras versions, backend, classes, parameters, date
    training_curves.png              optional: how the model was trained (the `kzoo` command
                                     draws it there); kept when the preset is re-saved

Any JSON string that begins with `assets/` is a path relative to the
directory, so a directory can be moved or copied. Weights files hold no
optimizer state.
"""

import importlib
import inspect
import json
import os

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
TRAINING_CURVES_FILE = "training_curves.png"

# Each part of a preset (its role): its JSON file, and its weights file for models.
PART_FILES = {
    "task": TASK_FILE,
    "backbone": CONFIG_FILE,
    "preprocessor": PREPROCESSOR_FILE,
    "tokenizer": TOKENIZER_FILE,
}
WEIGHTS_FILES = {"task": TASK_WEIGHTS_FILE, "backbone": MODEL_WEIGHTS_FILE}
PRESET_ENTRIES = {*PART_FILES.values(), *WEIGHTS_FILES.values(), METADATA_FILE, ASSET_DIR, TRAINING_CURVES_FILE}
RESAVE = "Re-save the preset with `save_to_preset(path)`"


def as_path(path):
    """`path` as a str with `~` expanded; a `ValueError` for anything but a path.

    Args:
        path: str or os.PathLike. A preset directory.

    Returns:
        The directory as a str.

    Example:

    >>> import pathlib
    >>> as_path(pathlib.Path("presets") / "tiny")
    'presets/tiny'
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"A preset directory is a str or os.PathLike path; got {type(path).__name__}.")
    return os.path.expanduser(os.fspath(path))


def preset_directory(path):
    """`path` as a str, after checking it is a preset directory (it holds one
    of config.json, tokenizer.json, preprocessor.json and task.json).

    Args:
        path: str or os.PathLike. The directory to check.

    Returns:
        The directory as a str.

    Example:

    >>> import tempfile
    >>> preset_directory(tempfile.mkdtemp())
    Traceback (most recent call last):
    ...
    ValueError: '...' is not a preset directory: it has no config.json (nor tokenizer.json, ...
    """
    directory = as_path(path)
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


def read_part(directory, name):
    """The serialized Keras object in `directory/name`; a `ValueError` says
    which file is damaged and how to fix it.

    Args:
        directory: str. A preset directory.
        name: str. One of the JSON files of `PART_FILES`.

    Returns:
        The dict `keras.saving.serialize_keras_object` wrote.

    Example:

    >>> import os, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> with open(os.path.join(directory, "config.json"), "w") as f:
    ...     _ = f.write("{")
    >>> read_part(directory, "config.json")
    Traceback (most recent call last):
    ...
    ValueError: '.../config.json' is not valid JSON (...). Re-save the preset with `save_to_preset(path)`.
    """
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


def saved_parts(directory):
    """`{role: its serialized object}` for the parts `directory` holds.

    Args:
        directory: str. A preset directory.

    Returns:
        A dict keyed by the roles of `PART_FILES`, in its order.

    Example:

    >>> import tempfile
    >>> from kzoo import BertTokenizer
    >>> path = tempfile.mkdtemp()
    >>> BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"]).save_to_preset(path)
    >>> {role: part["class_name"] for role, part in saved_parts(path).items()}
    {'tokenizer': 'BertTokenizer'}
    """
    return {
        role: read_part(directory, name)
        for role, name in PART_FILES.items()
        if os.path.isfile(os.path.join(directory, name))
    }


def describes(config, cls):
    """Whether a part's serialized object is a `cls` (or a subclass).

    The class is found by its registered name, or for Keras and kzoo classes
    by its module.

    Args:
        config: dict or None. A part's serialized object (None: no part).
        cls: type. The class asked for.

    Returns:
        True when `config` deserializes to a `cls`.

    Example:

    >>> import keras
    >>> config = keras.saving.serialize_keras_object(keras.layers.Dense(2))
    >>> describes(config, keras.layers.Layer), describes(config, keras.Model), describes(None, keras.Model)
    (True, False, False)
    """
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
