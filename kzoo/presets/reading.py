"""Reading kzoo preset directories: the part that is a given class, built
from its JSON with its weights (file names in `kzoo.presets.directory`)."""

import os

import keras

from kzoo.presets import atomic
from kzoo.presets.arguments import override_config, pop_backbone_kwargs, takes_argument
from kzoo.presets.directory import (
    ASSET_DIR,
    PART_FILES,
    RESAVE,
    TASK_FILE,
    WEIGHTS_FILES,
    as_path,
    describes,
    preset_directory,
    read_part,
    saved_parts,
)
from kzoo.presets.weights import load_weights


def load_directory(cls, path, /, **kwargs):
    """The part of a kzoo preset directory that is a `cls`, with its weights:
    the kzoo format's reader (see `kzoo.presets.load`).

    A class that takes a `backbone` argument is a task, read by `load_task`.
    Otherwise the first of task.json, config.json, preprocessor.json and
    tokenizer.json that holds a `cls` (or a subclass) is loaded.

    Args:
        cls: type. The class asked for.
        path: str or os.PathLike. A preset directory.
        **kwargs: replace fields of the saved config.

    Returns:
        A `cls`.

    Example:

    >>> import tempfile
    >>> from kzoo import BertTokenizer
    >>> path = tempfile.mkdtemp()
    >>> BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"]).save_to_preset(path)
    >>> load_directory(BertTokenizer, path, lowercase=False).lowercase
    False
    """
    if takes_argument(cls, "backbone"):
        return load_task(cls, path, **kwargs)
    directory = preset_directory(path)
    saved = saved_parts(directory)
    for role in PART_FILES:
        if describes(saved.get(role), cls):
            return _read_part(directory, role, kwargs)
    raise ValueError(
        f"{directory!r} holds no {cls.__name__}: it has "
        + ", ".join(f"{PART_FILES[role]} ({config['class_name']})" for role, config in saved.items())
        + ". Load those with their own classes' `from_preset`, or save a "
        f"{cls.__name__} there with `save_to_preset`."
    )


def load_task(cls, path, /, **kwargs):
    """A task model `cls` from a kzoo preset directory.

    If task.json holds a `cls`, the task is rebuilt from it (`kwargs`
    override its config) with all of task.weights.h5. Otherwise (a backbone
    alone, or another task such as a pre-trainer) it is
    `cls(backbone=..., **kwargs)`: the backbone from config.json +
    model.weights.h5, a fresh head, and the directory's preprocessor (or
    tokenizer) when `cls` takes one and `kwargs` do not give it. A `dtype`
    goes to the backbone.

    Args:
        cls: type. A task class (it takes a `backbone`).
        path: str or os.PathLike. A preset directory.
        **kwargs: the task's arguments, or fields of its saved config.

    Returns:
        A `cls`.

    Example:

    >>> import tempfile, keras
    >>> from kzoo import BertBackbone
    >>> from kzoo.presets import save_task
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
    directory = preset_directory(path)
    saved = saved_parts(directory)
    if describes(saved.get("task"), cls):
        return _read_part(directory, "task", kwargs)
    if "backbone" not in saved:
        raise ValueError(
            f"{directory!r} has no config.json: a {cls.__name__} needs a saved backbone "
            f"(config.json and model.weights.h5). {RESAVE}."
        )
    kwargs["backbone"] = _read_part(directory, "backbone", pop_backbone_kwargs(kwargs))
    wanted = next((a for a in ("preprocessor", "tokenizer") if takes_argument(cls, a)), None)
    role = next((r for r in ("preprocessor", "tokenizer") if r in saved), None)
    if wanted and role and wanted not in kwargs:
        part = _read_part(directory, role, {})
        # A task adapts a tokenizer into its own preprocessor; a pre-trainer keeps the tokenizer.
        kwargs[wanted] = part.tokenizer if (wanted, role) == ("tokenizer", "preprocessor") else part
    return cls(**kwargs)


def saved_task_config(path, cls):
    """The config of the `cls` task saved in kzoo preset directory `path`, or
    None (a built-in name, another format, or no such task there), e.g. to
    compare a fine-tuned head's `num_classes` with the one asked for.

    Args:
        path: str, os.PathLike or object. A preset name or directory.
        cls: type. The task class asked for.

    Returns:
        A dict, or None.

    Example:

    >>> saved_task_config("bert_tiny", object) is None
    True
    """
    atomic.recover(path)
    if not isinstance(path, (str, os.PathLike)) or not os.path.isdir(os.path.expanduser(os.fspath(path))):
        return None
    directory = as_path(path)
    # Only task.json is read: config.json may belong to another format (a Hugging Face checkpoint).
    config = read_part(directory, TASK_FILE) if os.path.isfile(os.path.join(directory, TASK_FILE)) else None
    return dict(config["config"]) if describes(config, cls) else None


def _read_part(directory, role, overrides):
    """Deserializes a part's JSON (asset paths made absolute, `overrides`
    applied) and loads its weights if it has some."""
    config = read_part(directory, PART_FILES[role])
    inner = dict(config["config"])
    backbone = inner.get("backbone")
    if role == "task" and isinstance(backbone, dict):
        backbone_config = {**backbone["config"], **pop_backbone_kwargs(overrides)}
        inner["backbone"] = {**backbone, "config": backbone_config}
    # Arguments the class gained after the preset was saved (e.g. label names) can be given too.
    cls = keras.saving.get_registered_object(config.get("registered_name") or config["class_name"])
    added = [name for name in overrides if cls is not None and takes_argument(cls, name)]
    inner = override_config(inner, overrides, directory, config["class_name"], extra=tuple(added))
    part = keras.saving.deserialize_keras_object(
        _with_asset_paths({**config, "config": inner}, directory, PART_FILES[role])
    )
    if role in WEIGHTS_FILES:
        load_weights(part, os.path.join(directory, WEIGHTS_FILES[role]), PART_FILES[role])
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
