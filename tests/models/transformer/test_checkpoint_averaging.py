"""Checkpoint averaging (Transformer sec. 6.1): the mean of saved weights, and a callback that saves them."""

import os
import types

import keras
import numpy as np
import pytest

from kzoo.models.transformer import checkpoint_averaging
from kzoo.models.transformer.checkpoint_averaging import CheckpointAveraging, average_checkpoints


class StepCounter(keras.layers.Layer):
    """Identity with an integer variable, which averaging must leave alone."""

    def build(self, input_shape):
        self.count = self.add_weight(shape=(), dtype="int32", initializer="zeros", trainable=False)

    def call(self, x):
        return x


def tiny_model(units=2):
    model = keras.Sequential(
        [
            keras.Input((3,)),
            keras.layers.Dense(units, name="dense"),
            keras.layers.BatchNormalization(),
            StepCounter(),
        ]
    )
    model.compile(optimizer="adam", loss="mse")
    return model


def hand_weights(k):
    """Checkpoint k: kernel k·[[1, 2], [3, 4], [5, 6]], bias [k, -k], BatchNorm
    gamma 1 + k, beta -k, moving mean k², moving variance 1 + k; counter 100·k."""
    return [
        k * np.arange(1, 7, dtype="float32").reshape(3, 2),
        np.array([k, -k], "float32"),
        np.full(2, 1.0 + k, "float32"),
        np.full(2, -k, "float32"),
        np.full(2, k * k, "float32"),
        np.full(2, 1.0 + k, "float32"),
        np.array(100 * k, "int32"),
    ]


def write_checkpoints(model, directory, ks):
    paths = []
    for k in ks:
        model.set_weights(hand_weights(k))
        paths.append(os.path.join(directory, f"checkpoint-{k}.weights.h5"))
        model.save_weights(paths[-1])
    return paths


def test_average_of_hand_set_checkpoints(tmp_path):
    model = tiny_model()
    paths = write_checkpoints(model, tmp_path, [1, 2, 6])
    model.set_weights(hand_weights(7))  # the model's own values before averaging
    average_checkpoints(model, paths)
    kernel, bias, gamma, beta, moving_mean, moving_variance, count = model.get_weights()
    # Means over k = 1, 2, 6: k -> 3, k² -> 41/3, 1 + k -> 4.
    np.testing.assert_allclose(kernel, 3 * np.arange(1, 7).reshape(3, 2), rtol=1e-6)
    np.testing.assert_allclose(bias, [3.0, -3.0], rtol=1e-6)
    np.testing.assert_allclose(gamma, [4.0, 4.0], rtol=1e-6)
    np.testing.assert_allclose(beta, [-3.0, -3.0], rtol=1e-6)
    np.testing.assert_allclose(moving_mean, [41 / 3, 41 / 3], rtol=1e-6)
    np.testing.assert_allclose(moving_variance, [4.0, 4.0], rtol=1e-6)
    assert int(count) == 700  # integers keep the model's value


def test_optimizer_state_is_kept(tmp_path):
    model = tiny_model()
    x, y = np.ones((4, 3), "float32"), np.zeros((4, 2), "float32")
    model.fit(x, y, batch_size=2, epochs=1, verbose=0)  # builds Adam: 2 iterations, moments
    paths = write_checkpoints(model, tmp_path, [1, 3])
    optimizer_state = [keras.ops.convert_to_numpy(v) for v in model.optimizer.variables]
    average_checkpoints(model, paths)
    np.testing.assert_allclose(model.get_weights()[1], [2.0, -2.0], rtol=1e-6)
    assert int(model.optimizer.iterations) == 2
    for before, variable in zip(optimizer_state, model.optimizer.variables):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(variable), before)


def test_mismatched_checkpoints_name_the_file_and_variable(tmp_path):
    model = tiny_model()
    (good,) = write_checkpoints(model, tmp_path, [1])
    wider = tiny_model(units=3)
    wider_path = os.path.join(tmp_path, "wider.weights.h5")
    wider.save_weights(wider_path)
    other = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, name="dense")])
    other_path = os.path.join(tmp_path, "other.weights.h5")
    other.save_weights(other_path)
    model.set_weights(hand_weights(5))

    # Variables are checked in the file's (alphabetical) order: BatchNormalization's come first.
    wider_message = (
        r"wider.weights.h5: variable layers/batch_normalization/vars/0 has shape \(3,\), "
        r"the model's has \(2,\)"
    )
    with pytest.raises(ValueError, match=wider_message):
        average_checkpoints(model, [good, wider_path])
    other_message = r"other.weights.h5 does not hold the model's variables: missing \['layers/batch_norm"
    with pytest.raises(ValueError, match=other_message):
        average_checkpoints(model, [good, other_path])
    with pytest.raises(ValueError, match="missing.weights.h5 is not an existing `.weights.h5` file"):
        average_checkpoints(model, [good, os.path.join(tmp_path, "missing.weights.h5")])
    with pytest.raises(ValueError, match="at least one checkpoint"):
        average_checkpoints(model, [])
    np.testing.assert_array_equal(model.get_weights()[1], [5.0, -5.0])  # unchanged


def fit_with(callback, steps, extra_callbacks=()):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(steps, 3)).astype("float32"), rng.normal(size=(steps, 2)).astype("float32")
    model.fit(x, y, batch_size=1, epochs=1, shuffle=False, verbose=0, callbacks=[*extra_callbacks, callback])
    return model


def checkpoint_weights(paths):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    weights = []
    for path in paths:
        model.load_weights(path)
        weights.append(model.get_weights())
    return weights


def test_callback_keeps_the_last_checkpoints_and_averages_them(tmp_path):
    callback = CheckpointAveraging(tmp_path / "checkpoints", every_n_steps=2, keep=3)
    model = fit_with(callback, steps=10)
    names = ["step-00000006.weights.h5", "step-00000008.weights.h5", "step-00000010.weights.h5"]
    assert sorted(os.listdir(tmp_path / "checkpoints")) == names  # steps 2 and 4 were deleted
    assert [os.path.basename(p) for p in callback.checkpoints] == names
    saved = checkpoint_weights(callback.checkpoints)
    assert not np.allclose(saved[0][0], saved[2][0])  # training moved the weights
    for averaged, per_checkpoint in zip(model.get_weights(), zip(*saved)):
        np.testing.assert_allclose(averaged, np.mean(per_checkpoint, axis=0), rtol=1e-6, atol=1e-7)


def test_callback_saves_the_final_weights_and_can_skip_averaging(tmp_path):
    callback = CheckpointAveraging(tmp_path, every_n_steps=3, keep=5, average_at_end=False)
    model = fit_with(callback, steps=7)
    assert [os.path.basename(p) for p in callback.checkpoints] == [
        "step-00000003.weights.h5",
        "step-00000006.weights.h5",
        "step-00000007.weights.h5",  # the end of training
    ]
    (last,) = checkpoint_weights(callback.checkpoints[-1:])
    for trained, saved in zip(model.get_weights(), last):
        np.testing.assert_array_equal(trained, saved)


def test_callback_saves_every_so_many_seconds(tmp_path, monkeypatch):
    clock = {"now": 0.0}
    monkeypatch.setattr(checkpoint_averaging, "time", types.SimpleNamespace(monotonic=lambda: clock["now"]))
    tick = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: clock.update(now=clock["now"] + 250.0)
    )
    callback = CheckpointAveraging(tmp_path, every_seconds=600, keep=5, average_at_end=False)
    fit_with(callback, steps=10, extra_callbacks=[tick])
    # 250 s a step: saved at 750 s (step 3), 1500 s (step 6), 2250 s (step 9), and at the end.
    assert [os.path.basename(p) for p in callback.checkpoints] == [
        f"step-{step:08d}.weights.h5" for step in (3, 6, 9, 10)
    ]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"every_n_steps": 0}, "every_n_steps=0 must be a positive"),
        ({"every_seconds": 0}, "every_seconds=0 must be positive"),
        ({"keep": 0}, "keep=0 must be at least 1"),
    ],
)
def test_callback_bad_arguments(tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        CheckpointAveraging(tmp_path, **kwargs)
