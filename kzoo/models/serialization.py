"""Configs of kzoo's models and preprocessors: their constructor arguments,
read from the attributes of the same names, Keras objects (a backbone, a
tokenizer, a dtype policy) serialized. A subclass adds a parameter by
storing it under its own name.
"""

import inspect

import keras


def constructor_parameters(cls, skip=()):
    """The names of `cls.__init__`'s named parameters, in order, without `skip`."""
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return tuple(p.name for p in parameters if p.kind in named and p.name not in skip)


def constructor_config(obj, skip=()):
    """`{parameter: value}` for `obj`'s constructor (without `skip`), read from
    its attributes; objects with a `get_config` serialized by Keras."""
    config = {}
    for name in constructor_parameters(type(obj), skip):
        value = getattr(obj, name)
        config[name] = keras.saving.serialize_keras_object(value) if hasattr(value, "get_config") else value
    return config


def from_constructor_config(cls, config):
    """`cls(**config)` with every serialized Keras object in `config` (a dict
    with `class_name` and `config`) deserialized first; a `ValueError` naming
    the fields (e.g. of an edited config.json) the constructor does not take
    or lacks, before Keras would wrap its `TypeError` in its own words.

    Example:

    >>> class Head:
    ...     def __init__(self, units, dtype=None):
    ...         self.units, self.dtype = units, dtype
    >>> from_constructor_config(Head, {"unitz": 2})
    Traceback (most recent call last):
    ...
    ValueError: The Head config has unknown field(s) ['unitz'] and lacks ['units'] ...
    """
    parameters, named = inspect.signature(cls.__init__).parameters, constructor_parameters(cls)
    missing = [name for name in named if parameters[name].default is inspect.Parameter.empty and name not in config]
    if any(p.kind == p.VAR_KEYWORD for p in parameters.values()):
        named += ("name", "trainable", "dtype")  # keras.Model's arguments
    unknown = sorted(set(config) - set(named))
    problems = ([f"has unknown field(s) {unknown}"] if unknown else []) + ([f"lacks {missing}"] if missing else [])
    if problems:
        raise ValueError(
            f"The {cls.__name__} config {' and '.join(problems)} (was its config.json edited?). "
            f"It takes {sorted(set(named))}."
        )
    return cls(**{k: keras.saving.deserialize_keras_object(v) if _is_serialized(v) else v for k, v in config.items()})


def _is_serialized(value):
    return isinstance(value, dict) and "class_name" in value and "config" in value
