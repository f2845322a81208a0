"""Checks every kzoo layer and model must pass, on every backend.

`run_layer_test` wraps a layer in a functional model and checks, with numbers:
- `get_config` / `from_config` round-trip to an identical config;
- `.keras` save/load gives identical outputs (max abs difference <= 1e-6);
- a few SGD steps change every trainable variable (no disconnected weights)
  and lower the loss;
- `mixed_float16` and `mixed_bfloat16` give finite outputs in the compute
  dtype with float32 variables.
"""

import os

import keras
import numpy as np
from keras import ops


def backend():
    return keras.backend.backend()


def to_numpy(x):
    return ops.convert_to_numpy(x)


def first_output(outputs):
    """The main tensor of a layer's output (tuples and dicts hold extras)."""
    if isinstance(outputs, (tuple, list)):
        return first_output(outputs[0])
    if isinstance(outputs, dict):
        return first_output(outputs["sequence_output"] if "sequence_output" in outputs else next(iter(outputs.values())))
    return outputs


def _functional_model(layer, tensor_inputs, call_kwargs):
    """A functional model calling `layer(*tensors, **call_kwargs)` on `keras.Input`s."""
    symbolic = {
        name: keras.Input(shape=value.shape[1:], dtype=str(value.dtype), name=name)
        for name, value in tensor_inputs.items()
    }
    output = first_output(layer(**symbolic, **call_kwargs))
    return keras.Model(inputs=symbolic, outputs=output)


def run_layer_test(
    layer_cls,
    init_kwargs,
    tensor_inputs,
    expected_output_shape,
    call_kwargs=None,
    tmp_path=None,
    check_training=True,
    check_mixed_precision=True,
):
    """Runs the shared checks. `tensor_inputs` maps call-argument names to numpy arrays."""
    call_kwargs = call_kwargs or {}

    # Config round-trip.
    layer = layer_cls(**init_kwargs)
    output = first_output(layer(**tensor_inputs, **call_kwargs))
    assert tuple(output.shape) == tuple(expected_output_shape)
    config = layer.get_config()
    revived = layer_cls.from_config(config)
    assert revived.get_config() == config

    # .keras save/load.
    model = _functional_model(layer_cls(**init_kwargs), tensor_inputs, call_kwargs)
    expected = to_numpy(model(tensor_inputs))
    if tmp_path is not None:
        path = os.path.join(str(tmp_path), f"{layer_cls.__name__}.keras")
        model.save(path)
        loaded = keras.saving.load_model(path)
        np.testing.assert_allclose(to_numpy(loaded(tensor_inputs)), expected, atol=1e-6, rtol=0)

    if check_training:
        _check_training(model, tensor_inputs, expected)
    if check_mixed_precision:
        for policy in ("mixed_float16", "mixed_bfloat16"):
            _check_mixed_precision(layer_cls, init_kwargs, tensor_inputs, call_kwargs, policy)


def _check_training(model, tensor_inputs, outputs):
    rng = np.random.default_rng(0)
    target = rng.normal(size=outputs.shape).astype("float32")
    before = [to_numpy(v).copy() for v in model.trainable_variables]
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    first = model.evaluate(tensor_inputs, target, verbose=0)
    model.fit(tensor_inputs, target, epochs=5, batch_size=len(target), verbose=0)
    last = model.evaluate(tensor_inputs, target, verbose=0)
    assert last < first, f"loss did not fall: {first} -> {last}"
    unchanged = [
        v.path
        for v, b in zip(model.trainable_variables, before)
        if np.array_equal(to_numpy(v), b)
    ]
    assert not unchanged, f"variables without gradient: {unchanged}"


def _check_mixed_precision(layer_cls, init_kwargs, tensor_inputs, call_kwargs, policy):
    layer = layer_cls(**{**init_kwargs, "dtype": policy})
    output = first_output(layer(**tensor_inputs, **call_kwargs))
    compute_dtype = policy.split("_")[1]
    assert keras.backend.standardize_dtype(output.dtype) == compute_dtype
    assert all(keras.backend.standardize_dtype(v.dtype) == "float32" for v in layer.weights)
    assert np.all(np.isfinite(to_numpy(ops.cast(output, "float32"))))
