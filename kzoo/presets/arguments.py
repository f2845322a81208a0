"""Constructor arguments of the classes a preset builds: which a class takes,
which a task hands to its backbone, and config overrides checked by name."""

import inspect

# Task keyword arguments forwarded to the backbone (as KerasHub does).
BACKBONE_KWARGS = ("dtype",)


def takes_argument(cls, name):
    """Whether `cls(...)` has a parameter `name`.

    A task takes a `backbone` (and maybe a `preprocessor` or `tokenizer`);
    that is how the preset loader tells tasks from backbones.

    Args:
        cls: type. The class to inspect.
        name: str. The parameter name.

    Returns:
        True when `cls.__init__` has a parameter called `name`.

    Example:

    >>> from kzoo import BertPreprocessor
    >>> takes_argument(BertPreprocessor, "tokenizer"), takes_argument(BertPreprocessor, "backbone")
    (True, False)
    """
    return name in inspect.signature(cls.__init__).parameters


def pop_backbone_kwargs(kwargs):
    """Removes and returns the task arguments that belong to its backbone.

    Only `dtype` does, as in KerasHub: a task loaded with
    `dtype="bfloat16"` runs its backbone in that precision.

    Args:
        kwargs: dict. A task's keyword arguments; the backbone's are removed
            from it.

    Returns:
        A dict of the removed arguments.

    Example:

    >>> kwargs = {"num_classes": 2, "dtype": "bfloat16"}
    >>> pop_backbone_kwargs(kwargs), kwargs
    ({'dtype': 'bfloat16'}, {'num_classes': 2})
    """
    return {key: kwargs.pop(key) for key in BACKBONE_KWARGS if key in kwargs}


def override_config(config, overrides, source, class_name, extra=()):
    """`config` updated with `overrides`, each of which must name a config field.

    Args:
        config: dict. The saved (or built-in) constructor arguments.
        overrides: dict. The arguments to replace.
        source: str. Where `config` came from (a preset name or directory),
            for the error message.
        class_name: str. The class `config` builds, for the error message.
        extra: tuple of str. Argument names accepted although not in
            `config` (e.g. `dtype`). Defaults to `()`.

    Returns:
        A new dict: `config` with `overrides` applied.

    Raises:
        ValueError: an override names no field of `config` nor of `extra`.

    Example:

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
