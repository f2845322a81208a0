"""Loading a built-in preset name: its released weights, read by the
registered format that reads them (exactly as a directory would be), or
its architecture with random weights.

| the name has            | `load_weights=True` (the default)            | `load_weights=False`                    |
|-------------------------|-----------------------------------------------|-----------------------------------------|
| released weights        | fetched once (`kzoo.presets.sources`), loaded | random weights, no warning, no network; |
|                         | with their vocabulary and casing              | a task gets the tokenizer if the files  |
|                         |                                               | are already on this machine             |
| no weights (architecture| random weights and one warning saying so      | random weights, no warning              |
| only)                   |                                               |                                         |

A tokenizer or preprocessor needs the released vocabulary: an architecture
only has none (a `ValueError`), and with `load_weights=False` it is read only
from files already on this machine (the Hugging Face cache, an installed
package), never downloaded.
"""

import inspect
import warnings

import keras

from kzoo.presets.arguments import override_config, takes_argument
from kzoo.presets.builtin import build_with_backbone, get_preset
from kzoo.presets.registry import detect_format, get_format
from kzoo.presets.sources import weights_directory


def load_name(cls, name, /, load_weights=True, **kwargs):
    """A `cls` from built-in preset `name` (the body of `kzoo.presets.load`
    for a name).

    Every check (the class, a task's required arguments, the weights being
    available) comes before anything is fetched or built.

    Args:
        cls: type. The kzoo class asked for: the preset's `class_name`, a
            task on it, or (for a preset with released weights) a
            tokenizer or preprocessor.
        name: str. A built-in preset name.
        load_weights: bool. Load the released weights (and vocabulary).
            `False` builds the architecture with random weights, without a
            warning and without the network. Defaults to `True`.
        **kwargs: the class's arguments, or overrides of the config (as for
            a checkpoint directory when weights are loaded).

    Returns:
        A `cls`.

    Example:

    >>> from kzoo import BertBackbone, BertTokenizer
    >>> load_name(BertBackbone, "bert_tiny", load_weights=False).num_layers
    2
    >>> load_name(BertTokenizer, "bert_l6_h768_a3")
    Traceback (most recent call last):
    ...
    ValueError: Preset 'bert_l6_h768_a3' describes a BertBackbone, not a BertTokenizer: it is architecture only (no released weights or vocabulary)...
    """
    preset = get_preset(name)
    _check_class(cls, name, preset)
    _check_task_arguments(cls, kwargs)
    if cls.__name__ == preset["class_name"]:  # overrides named wrongly fail before any download
        override_config(preset["config"], kwargs, name, cls.__name__, extra=("dtype", "name"))
    released = preset.get("weights") is not None
    if released and (load_weights or not issubclass(cls, keras.Model)):
        return _read(cls, weights_directory(name, preset, local_only=not load_weights), kwargs)
    if released and takes_argument(cls, "backbone"):
        part = next((p for p in ("preprocessor", "tokenizer") if takes_argument(cls, p)), None)
        if part is not None and part not in kwargs:
            tokenizer = _local_tokenizer(name, preset)
            if tokenizer is not None:
                kwargs[part] = tokenizer
    if not released and load_weights:
        warnings.warn(
            f"Preset {name!r} is architecture only: no released weights, so this {cls.__name__} "
            "starts from random weights. Train it, or load trained weights from a preset directory "
            "or checkpoint; from_preset(..., load_weights=False) asks for random weights without "
            "this warning.",
            UserWarning,
            stacklevel=4,
        )
    return build_with_backbone(cls, name, **kwargs)


def _check_class(cls, name, preset):
    """A model must be the preset's class or a task; anything else (a
    tokenizer, a preprocessor) needs the released files."""
    expected = preset["class_name"]
    if issubclass(cls, keras.Model):
        if cls.__name__ == expected or takes_argument(cls, "backbone"):
            return
        raise ValueError(
            f"Preset {name!r} describes a {expected}, not a {cls.__name__}. Use "
            f"kzoo.{expected}.from_preset({name!r}) (or a task's from_preset), or pass a preset "
            "directory written by `save_to_preset`."
        )
    if preset.get("weights") is None:
        raise ValueError(
            f"Preset {name!r} describes a {expected}, not a {cls.__name__}: it is architecture only "
            f"(no released weights or vocabulary), so it has no {cls.__name__}. Build one from your "
            "vocabulary, or pass a preset directory written by `save_to_preset`."
        )


def _check_task_arguments(cls, kwargs):
    """A task's required arguments (e.g. `num_classes`), checked before the
    weights are fetched: the `TypeError` the constructor would raise."""
    if not takes_argument(cls, "backbone"):
        return
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    missing = [
        parameter.name
        for parameter in list(inspect.signature(cls.__init__).parameters.values())[1:]
        if parameter.kind in named and parameter.default is parameter.empty
        and parameter.name != "backbone" and parameter.name not in kwargs
    ]
    if missing:
        raise TypeError(
            f"{cls.__name__}.__init__() missing required argument(s): {', '.join(map(repr, missing))}"
        )


def _local_tokenizer(name, preset):
    """The preset's tokenizer from files already on this machine, or None."""
    if "tokenizer" not in preset:
        return None
    try:
        directory = weights_directory(name, preset, local_only=True)
    except ValueError:
        return None
    tokenizer_class = keras.saving.get_registered_object(f"kzoo>{preset['tokenizer']['class_name']}")
    return _read(tokenizer_class, directory, {})


def _read(cls, directory, kwargs):
    """`cls` from `directory`, read by the registered format that claims it."""
    return get_format(detect_format(directory), "load").load(cls, directory, **kwargs)
