"""Configs of kzoo's models and preprocessors: their constructor arguments.

`kzoo.models.Backbone`, `kzoo.models.Task` and `kzoo.models.Preprocessor`
each write `get_config` / `from_config` once, with these functions: a config
holds the value of every named constructor parameter, read from the attribute
of the same name, with Keras objects (a backbone, a preprocessor, a tokenizer,
a dtype policy) serialized; `from_config` deserializes them and calls the
constructor. A subclass adds a parameter by storing it under its own name.
`save` and `save_weights` are their atomic `keras.Model.save` / `save_weights`.
"""

import contextlib
import inspect
import os

import keras

from kzoo import atomic


def constructor_parameters(cls, skip=()):
    """The names of `cls.__init__`'s named parameters, in order, without `skip`.

    Args:
        cls: type. A class.
        skip: tuple of str. Names to leave out. Defaults to `()`.

    Returns:
        A tuple of str (`self`, `*args` and `**kwargs` left out).

    Example:

    >>> class Head:
    ...     def __init__(self, backbone, num_classes, dropout=0.1, **kwargs):
    ...         pass
    >>> constructor_parameters(Head, skip=("backbone",))
    ('num_classes', 'dropout')
    """
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return tuple(p.name for p in parameters if p.kind in named and p.name not in skip)


def constructor_config(obj, skip=()):
    """`{parameter: value}` for `obj`'s constructor, read from its attributes;
    objects with a `get_config` are serialized with
    `keras.saving.serialize_keras_object`.

    Args:
        obj: object. An instance whose constructor arguments are attributes.
        skip: tuple of str. Parameters to leave out. Defaults to `()`.

    Returns:
        A dict, in the constructor's parameter order.

    Example:

    >>> class Pair:
    ...     def __init__(self, first, second=2):
    ...         self.first, self.second = first, second
    >>> constructor_config(Pair(1))
    {'first': 1, 'second': 2}
    """
    config = {}
    for name in constructor_parameters(type(obj), skip):
        value = getattr(obj, name)
        config[name] = keras.saving.serialize_keras_object(value) if hasattr(value, "get_config") else value
    return config


def from_constructor_config(cls, config):
    """`cls(**config)` with every serialized Keras object in `config` (a dict
    with `class_name` and `config`) deserialized first.

    Args:
        cls: type. The class to build.
        config: dict. What `constructor_config` (plus `name`, `trainable`, ...) gave.

    Returns:
        A `cls`.

    Example:

    >>> class Head:
    ...     def __init__(self, units, dtype=None):
    ...         self.units, self.dtype = units, dtype
    >>> policy = keras.dtype_policies.serialize(keras.DTypePolicy("bfloat16"))
    >>> from_constructor_config(Head, {"units": 2, "dtype": policy}).dtype.name
    'bfloat16'
    >>> from_constructor_config(Head, {"unitz": 2})
    Traceback (most recent call last):
    ...
    ValueError: The Head config has unknown field(s) ['unitz'] and lacks ['units'] ...
    """
    _check_fields(cls, config)
    config = {
        key: keras.saving.deserialize_keras_object(value) if _is_serialized(value) else value
        for key, value in config.items()
    }
    return cls(**config)


def _check_fields(cls, config):
    """A `ValueError` naming the fields of a config (e.g. an edited
    config.json) that the constructor does not take or needs and lacks,
    before Keras would wrap the constructor's `TypeError` in its own words."""
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    named = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    if any(p.kind == p.VAR_KEYWORD for p in parameters):
        named |= {"name", "trainable", "dtype"}  # keras.Model's arguments
    required = [p.name for p in parameters if p.name in named and p.default is p.empty]
    unknown = sorted(set(config) - named)
    missing = [name for name in required if name not in config]
    problems = ([f"has unknown field(s) {unknown}"] if unknown else []) + ([f"lacks {missing}"] if missing else [])
    if problems:
        raise ValueError(
            f"The {cls.__name__} config {' and '.join(problems)} (was its config.json edited?). "
            f"It takes {sorted(named)}."
        )


def _is_serialized(value):
    return isinstance(value, dict) and "class_name" in value and "config" in value


def recompile(model, config):
    """Compiles `model` from the compile config of a `.keras` file, its
    optimizer (with its schedule) restored and built: `compile_from_config`
    of kzoo's models, whose own `compile` Keras would otherwise skip.

    Args:
        model: keras.Model. The model being loaded.
        config: dict. The serialized arguments of its `compile`.

    Example:

    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> recompile(model, keras.saving.serialize_keras_object({"optimizer": "adam", "loss": "mse"}))
    >>> type(model.optimizer).__name__
    'Adam'
    """
    model.compile(**keras.saving.deserialize_keras_object(config))
    if model.built:
        model.optimizer.build(model.trainable_variables)


def save(model, filepath, overwrite=True, zipped=None, **kwargs):
    """`keras.Model.save`, atomic: the `.keras` file is written beside
    `filepath` and renamed into place once complete (`kzoo.atomic`),
    so a save that fails at any point (an error, a full disk, a killed
    process) leaves the previous file as it was. kzoo's `Backbone.save` and
    `Task.save`.

    Left to Keras as they are: paths that are not local (`gs://...`),
    `overwrite=False` over an existing file (Keras asks first) and an
    unzipped `.keras` directory (`zipped=False`).

    Args:
        model: keras.Model. The model to save.
        filepath: str or os.PathLike. The `.keras` file.
        overwrite: bool. As `keras.Model.save`. Defaults to `True`.
        zipped: bool. As `keras.Model.save`. Defaults to `None`.
        **kwargs: other `keras.Model.save` arguments.

    Example:

    >>> import os, tempfile
    >>> inputs = keras.Input((3,))
    >>> model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    >>> path = os.path.join(tempfile.mkdtemp(), "model.keras")
    >>> save(model, path)
    >>> os.listdir(os.path.dirname(path))
    ['model.keras']
    """
    with _beside(filepath, overwrite, zipped is not False) as path:
        return keras.Model.save(model, path, overwrite=overwrite, zipped=zipped, **kwargs)


def save_weights(model, filepath, overwrite=True, max_shard_size=None):
    """`keras.Model.save_weights`, atomic as `save` (sharded weights,
    `max_shard_size`, are left to Keras). kzoo's `Backbone.save_weights` and
    `Task.save_weights`, which `keras.callbacks.BackupAndRestore` and
    `ModelCheckpoint` save through.

    Args:
        model: keras.Model. The model whose weights to save.
        filepath: str or os.PathLike. The `.weights.h5` file.
        overwrite: bool. As `keras.Model.save_weights`. Defaults to `True`.
        max_shard_size: float. As `keras.Model.save_weights`. Defaults to `None`.

    Example:

    >>> import os, tempfile
    >>> inputs = keras.Input((3,))
    >>> model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    >>> path = os.path.join(tempfile.mkdtemp(), "model.weights.h5")
    >>> save_weights(model, path)
    >>> os.listdir(os.path.dirname(path))
    ['model.weights.h5']
    """
    with _beside(filepath, overwrite, max_shard_size is None) as path:
        return keras.Model.save_weights(model, path, overwrite=overwrite, max_shard_size=max_shard_size)


@contextlib.contextmanager
def _beside(filepath, overwrite, one_file):
    """A scratch path beside `filepath`, renamed to it on success; `filepath`
    itself where Keras writes in its own way (see `save`)."""
    local = isinstance(filepath, (str, os.PathLike)) and "://" not in os.fspath(filepath)
    if not (local and one_file) or (not overwrite and os.path.exists(filepath)):
        yield filepath
        return
    with atomic.replacing_file(filepath) as scratch:
        yield scratch
