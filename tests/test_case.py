"""Checks every kzoo layer and model must pass, on every backend.

`run_layer_test` wraps a layer in a functional model and checks, with numbers:
- `get_config` / `from_config` round-trip to an identical config;
- `.keras` save/load gives identical outputs (max abs difference <= 1e-6);
- a few SGD steps change every trainable variable (no disconnected weights)
  and lower the loss;
- `mixed_float16` and `mixed_bfloat16` give finite outputs in the compute
  dtype with float32 variables.

`run_task_test` (KerasHub's name) checks a task on raw examples: `predict`'s
shape, finite values, `get_config` / `from_config`, `.keras` and preset
round-trips to the same predictions (<= 1e-6), and one `fit` epoch whose loss
is finite and whose weights move. `run_preset_test` builds a class from a
preset name without weights and checks its output shape and the round-trip
through a preset directory.
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


def _outputs(outputs):
    return [to_numpy(o) for o in keras.tree.flatten(outputs)]


def _assert_same(a, b, atol=1e-6):
    for x, y in zip(_outputs(a), _outputs(b)):
        np.testing.assert_allclose(x, y, atol=atol, rtol=0)


def run_task_test(task, x, y, expected_output_shape, tmp_path, gradient_free=()):
    """The checks every kzoo task passes on raw examples `x` (with labels `y`).

    Args:
        task: a built `kzoo.models.Task` with a preprocessor.
        x: raw examples as `predict` takes them (texts, a tuple of columns).
        y: their labels, as `fit` takes them.
        expected_output_shape: tuple, or a dict of tuples for dict outputs.
        tmp_path: a directory for the saved files.
        gradient_free: paths of variables the loss cannot move (checked for
            nothing), e.g. a bias added to every logit of a softmax.
    """
    predictions = task.predict(x, verbose=0)
    shapes = keras.tree.map_structure(lambda a: tuple(a.shape), predictions)
    assert shapes == expected_output_shape, shapes
    assert all(np.all(np.isfinite(o)) for o in _outputs(predictions))

    config = task.get_config()
    assert type(task).from_config(config).get_config() == config
    path = os.path.join(str(tmp_path), "task.keras")
    task.save(path)
    _assert_same(keras.saving.load_model(path).predict(x, verbose=0), predictions)
    preset = os.path.join(str(tmp_path), "preset")
    task.save_to_preset(preset)
    _assert_same(type(task).from_preset(preset).predict(x, verbose=0), predictions)

    before = [to_numpy(v).copy() for v in task.trainable_variables]
    history = task.fit(x, y, batch_size=len(y) if hasattr(y, "__len__") else None, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][-1])
    moved = [v.path in gradient_free or not np.array_equal(to_numpy(v), b)
             for v, b in zip(task.trainable_variables, before)]
    assert all(moved), [v.path for v, m in zip(task.trainable_variables, moved) if not m]


def run_preset_test(cls, preset, init_kwargs, input_data, expected_output_shape, tmp_path):
    """`cls.from_preset(preset, load_weights=False, **init_kwargs)` (no
    network) gives outputs of `expected_output_shape` on `input_data`, and the
    same outputs after a round-trip through a preset directory."""
    model = cls.from_preset(preset, load_weights=False, **init_kwargs)
    outputs = model.predict(input_data, verbose=0) if hasattr(model, "predict") else model(input_data)
    shapes = keras.tree.map_structure(lambda a: tuple(a.shape), outputs)
    assert shapes == expected_output_shape, shapes
    path = os.path.join(str(tmp_path), preset)
    model.save_to_preset(path)
    revived = cls.from_preset(path)
    _assert_same(revived.predict(input_data, verbose=0) if hasattr(revived, "predict") else revived(input_data),
                 outputs)


class FirstFitState(keras.callbacks.Callback):
    """Passed to each `fit` of one model: the first records every variable (weights, dropout
    seed states, the optimizer's, which exist once `fit` begins), later ones put them back
    before their first step. Each `fit` then trains as a fresh model's first would, with the
    steps the first one traced (on TensorFlow a fresh model's first `fit` traces for 1.5-2 s)."""

    def __init__(self):
        super().__init__()
        self.state = None

    def on_train_begin(self, logs=None):
        # A resumed fit's epoch, which Keras' BackupAndRestore leaves on the model for good
        # (keras 3.x: `Trainer._initial_epoch`); a callback after this one may set it again.
        self.model._initial_epoch = None
        variables = [*self.model.variables, *self.model.optimizer.variables]
        if self.state is None:
            self.state = [np.array(to_numpy(v)) for v in variables]
            return
        for variable, value in zip(variables, self.state, strict=True):
            variable.assign(value)
