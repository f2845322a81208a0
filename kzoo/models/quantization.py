"""int8 weights for inference: Keras' own quantization of kzoo's backbones and
tasks, kept through configs, `.keras` files and presets.

`quantize` is `keras.Model.quantize(model, "int8")`: every `Dense` and
`EinsumDense` and the token and segment tables keep int8 weights with one
float32 scale per output channel (per row for a table), and a dense layer
quantizes its inputs per token on the fly (Keras' `AbsMaxQuantizer`); the
position table and the LayerNorms stay float32. A quantized model is for
inference. Its config records the mode (`"quantization": "int8"`) for the
model's own layers (a task's backbone records its own): `from_config` builds
the float model, then quantizes the same layers, whose int8 weights the saved
weights fill. A model only part of whose layers are quantized (`filters`)
has no such record and is refused by `get_config`.
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
    """Quantizes `model`'s weights to int8 for inference, in place (`mode`:
    "int8"; `config`: Keras' default one only, as a config records the mode, not
    the quantizers). Layers quantized already (a task's backbone) stay as they are."""
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
    """Keras' `Layer.__delattr__` runs `gc.collect()` for every float kernel it
    drops; inside this block `gc.collect()` does nothing, and one collection at
    the end frees the same memory."""
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
    outside its backbone): None for float ones, or a `ValueError` when only
    some are quantized (no config can rebuild that)."""
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
    """`config` with `"quantization"` added when `model`'s own layers are quantized (`mode_of`)."""
    mode = mode_of(model)
    return config if mode is None else {**config, CONFIG_KEY: mode}


def from_config(cls, config, build):
    """`build(cls, config)` without `"quantization"`, then its own layers
    quantized as that says (a task's backbone is built from its own config)."""
    config = dict(config)
    mode = config.pop(CONFIG_KEY, None)
    model = build(cls, config)
    if mode is not None:
        if mode not in MODES:
            raise ValueError(f"The {cls.__name__} config has quantization={mode!r}; kzoo reads {list(MODES)}.")
        _quantize_layers(model, _quantizable(model, _parts(model)), mode)
    return model
