"""int8 weights for inference (issue 22): Keras' own quantization of kzoo's
backbones and tasks, kept through configs, `.keras` files and presets.

`quantize(model)` (kzoo's `Backbone.quantize` and `Task.quantize`) is
`keras.Model.quantize(model, "int8")`: every `Dense` and `EinsumDense` (the
attention projections, the feed-forward network, the pooler and the heads)
and the token and segment tables (`kzoo.layers.TokenEmbedding`) keep int8
weights with one float32 scale per output channel (per row for a table);
a dense layer also quantizes its inputs to int8 per token on the fly, so its
matrix product runs on int8 (Keras' `AbsMaxQuantizer`). The position table
and the LayerNorms stay float32. Weights shrink about 4x; the model computes
its outputs within the rounding of int8 (the tests measure how close).

A quantized model is for inference: its int8 weights do not train.

Its config records it (`"quantization": "int8"`), for the model's own layers
(a task's head; its backbone's config records the backbone's): `from_config`
builds the float model, then quantizes the same layers, whose int8 weights and
scales the saved weights then fill. So `get_config`/`from_config`, `.keras`
files and `save_to_preset`/`from_preset` give the quantized model back, on
any backend. A model only part of whose layers are quantized (by
`keras.Model.quantize` with `filters`) has no such record and is refused
by `get_config`.
"""

import contextlib
import gc
import warnings

import keras

MODES = ("int8",)
CONFIG_KEY = "quantization"
# Keras warns for every layer it cannot quantize (inputs, LayerNorm, dropout,
# a preprocessor): they stay float by design. NumPy warns inside Keras' own
# conversion of TensorFlow variables.
KERAS_WARNINGS = (r"Layer .* does not have a `quantize` method implemented", r"__array__ implementation doesn't accept")


def quantize(model, mode, config=None):
    """Quantizes `model`'s weights to int8 for inference, in place (see the
    module docstring). Layers quantized already (e.g. a task's backbone) stay as they are.

    Args:
        model: `kzoo.models.Backbone` or `kzoo.models.Task`. A built model
            computing in float32 or bfloat16.
        mode: str. `"int8"`, the one mode kzoo keeps through configs and presets.
        config: `keras.quantizers.Int8QuantizationConfig` or None. Keras'
            default one only (a config records the mode, not the
            quantizers). Defaults to `None`.

    Example:

    >>> import numpy as np
    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> inputs = {"token_ids": np.array([[2, 7, 9, 3]])}
    >>> before = keras.ops.convert_to_numpy(backbone(inputs)["pooled_output"])
    >>> backbone.quantize("int8")
    >>> backbone.get_config()["quantization"], str(backbone.transformer_layers[0].weights[1].dtype)
    ('int8', 'int8')
    >>> after = keras.ops.convert_to_numpy(backbone(inputs)["pooled_output"])
    >>> bool(np.abs(after - before).max() < 0.05)
    True
    """
    if mode not in MODES:
        raise ValueError(
            f"kzoo quantizes to {' or '.join(map(repr, MODES))} (Keras' int8 of the dense, einsum and "
            f"embedding layers, kept through configs and presets); got mode={mode!r}."
        )
    if config is not None and _serialized(config) != _serialized(keras.quantizers.Int8QuantizationConfig()):
        raise ValueError(
            "kzoo quantizes with Keras' default int8 config (weights per channel, inputs per token), "
            "which its configs and presets rebuild; other quantizers would not survive a save. "
            "Call quantize('int8') without `config`."
        )
    todo = [layer for layer in _quantizable(model) if layer.quantization_mode is None]
    if not todo:
        raise ValueError(
            f"This {type(model).__name__} is quantized to {mode} already; quantize a float model "
            f"(e.g. kzoo.{type(model).__name__}.from_preset(path) before its `quantize`)."
        )
    _quantize_layers(model, todo, mode)


def _serialized(config):
    return keras.saving.serialize_keras_object(config)


def _quantize_layers(model, layers, mode):
    chosen = {id(layer) for layer in layers}
    with warnings.catch_warnings(), _one_garbage_collection():
        for message in KERAS_WARNINGS:
            warnings.filterwarnings("ignore", message=message)
        keras.Model.quantize(model, mode, filters=lambda layer: id(layer) in chosen)


@contextlib.contextmanager
def _one_garbage_collection():
    """Buys a 2-layer classifier's quantization 78 of its 79 full garbage
    collections, 0.5-0.8 s each in a process holding TensorFlow and a few
    models (the torch quantization tests 142 -> 37 s, 2026-11-25): Keras'
    `Layer.__delattr__` runs `gc.collect()` for every float kernel it drops;
    inside this block `gc.collect()` does nothing, and one collection at the
    end frees the same memory."""
    collect = gc.collect
    gc.collect = lambda generation=2: 0
    try:
        yield
    finally:
        gc.collect = collect
        gc.collect()


def _parts(model):
    """The models inside `model` whose own configs record their quantization: a task's backbone."""
    backbone = getattr(model, "backbone", None)
    return (backbone,) if isinstance(backbone, keras.Model) and backbone is not model else ()


def _quantizable(model, skip=()):
    """The leaf layers Keras can quantize, outside the models `skip`."""
    skipped = {id(layer) for owner in skip for layer in owner._flatten_layers()}
    return [
        layer
        for layer in model._flatten_layers()
        if id(layer) not in skipped
        and len(list(layer._flatten_layers())) == 1
        and isinstance(layer, (keras.layers.Dense, keras.layers.EinsumDense, keras.layers.Embedding))
    ]


def mode_of(model):
    """The quantization mode of `model`'s own quantizable layers (a task's
    outside its backbone, whose config records its own): None for float
    ones, or a `ValueError` when only some are quantized (no config can
    rebuild that).

    Args:
        model: keras.Model. A kzoo backbone or task.

    Example:

    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> mode_of(backbone) is None
    True
    """
    modes = {layer.quantization_mode for layer in _quantizable(model, _parts(model))}
    if len(modes) > 1:
        raise ValueError(
            f"Only some layers of this {type(model).__name__} are quantized ({sorted(map(str, modes))}), "
            "e.g. by keras.Model.quantize with `filters`: its config cannot rebuild that. Quantize "
            "the whole model with its own `quantize('int8')`, or save it before quantizing."
        )
    mode = modes.pop() if modes else None
    if mode not in (None, *MODES):
        raise ValueError(
            f"This {type(model).__name__} is quantized to {mode}; kzoo saves float and int8 models only."
        )
    return mode


def with_mode(model, config):
    """`config` with `"quantization"` added when `model`'s own layers are
    quantized (`mode_of`): kzoo's `Backbone.get_config` and `Task.get_config`.

    Args:
        model: keras.Model. The model whose config it is.
        config: dict. Its config.

    Example:

    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> "quantization" in with_mode(backbone, {})
    False
    """
    mode = mode_of(model)
    return config if mode is None else {**config, CONFIG_KEY: mode}


def from_config(cls, config, build):
    """`build(cls, config)` without `"quantization"`, then its own layers
    quantized as that says (a task's backbone, built from its own config,
    is quantized already or not): kzoo's `Backbone.from_config` and
    `Task.from_config`.

    Args:
        cls: type. The model class.
        config: dict. Its config.
        build: callable. `(cls, config) -> model`, e.g.
            `kzoo.models.serialization.from_constructor_config`.

    Example:

    >>> from kzoo import BertBackbone
    >>> from kzoo.models.serialization import from_constructor_config
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> backbone.quantize("int8")
    >>> from_config(BertBackbone, backbone.get_config(), from_constructor_config).get_config()["quantization"]
    'int8'
    """
    config = dict(config)
    mode = config.pop(CONFIG_KEY, None)
    model = build(cls, config)
    if mode is not None:
        if mode not in MODES:
            raise ValueError(f"The {cls.__name__} config has quantization={mode!r}; kzoo reads {list(MODES)}.")
        _quantize_layers(model, _quantizable(model, _parts(model)), mode)
    return model
