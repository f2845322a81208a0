"""kzoo's Dropout: one uniform draw per two elements, statistics as
`keras.layers.Dropout` (rate exact to 1/2048, expectation preserved)."""

import keras
import numpy as np
import pytest

from kzoo.backend import jax as jax_backend
from kzoo.backend import tensorflow as tensorflow_backend
from kzoo.layers import Dropout
from tests.test_case import run_layer_test, to_numpy


def dropped(rate, shape, seed=0, dtype="float32"):
    layer = Dropout(rate, seed=seed)
    x = np.ones(shape, dtype)
    return to_numpy(keras.ops.cast(layer(x, training=True), "float32")), layer


def test_layer_checks(tmp_path):
    x = np.random.default_rng(0).normal(size=(2, 5, 7)).astype("float32")
    run_layer_test(
        Dropout,
        {"rate": 0.1, "seed": 3},
        {"inputs": x},
        expected_output_shape=(2, 5, 7),
        tmp_path=tmp_path,
        check_training=False,  # no weights
    )


@pytest.mark.parametrize("rate", [0.1, 0.3, 0.5])
def test_drop_rate_and_scale(rate):
    y, _ = dropped(rate, (16, 8, 64, 128))
    applied = round(rate * 2048) / 2048
    n = y.size
    sigma = np.sqrt(applied * (1 - applied) / (n / 2))  # per half
    width = y.shape[-1] // 2
    for half in (y[..., :width], y[..., width:]):  # the two bit fields of each draw
        assert abs((half == 0).mean() - applied) < 5 * sigma
    np.testing.assert_allclose(np.unique(y[y != 0]), [1 / (1 - applied)], rtol=1e-6)
    # Expectation preserved: mean of y within 5 sigma of 1.
    assert abs(y.mean() - 1.0) < 5 * np.sqrt(applied / (1 - applied) / n)


def test_the_two_elements_of_a_draw_are_independent():
    y, _ = dropped(0.1, (64, 4096))
    first, second = (y[:, :2048] == 0).ravel(), (y[:, 2048:] == 0).ravel()
    # Pearson correlation of independent indicators: ~N(0, 1/n).
    assert abs(np.corrcoef(first, second)[0, 1]) < 5 / np.sqrt(first.size)
    # Neighbouring elements too (they come from different draws).
    assert abs(np.corrcoef(first[:-1], first[1:])[0, 1]) < 5 / np.sqrt(first.size)


def test_odd_widths_and_new_masks_per_call():
    y, layer = dropped(0.2, (3, 1001))
    assert y.shape == (3, 1001)
    assert 0.1 < (y == 0).mean() < 0.3
    again = to_numpy(layer(np.ones((3, 1001), "float32"), training=True))
    assert np.mean((again == 0) != (y == 0)) > 0.1  # the seed generator moves on


def test_identity_unless_training():
    x = np.random.default_rng(1).normal(size=(4, 6)).astype("float32")
    layer = Dropout(0.5)
    np.testing.assert_array_equal(to_numpy(layer(x)), x)
    np.testing.assert_array_equal(to_numpy(layer(x, training=False)), x)
    np.testing.assert_array_equal(to_numpy(Dropout(0.0)(x, training=True)), x)


def test_keeps_the_compute_dtype():
    layer = Dropout(0.1, dtype="mixed_bfloat16")
    y = layer(np.ones((4, 64), "float32"), training=True)
    assert keras.backend.standardize_dtype(y.dtype) == "bfloat16"
    kept = to_numpy(keras.ops.cast(y, "float32"))
    assert 0.0 < (kept == 0).mean() < 0.3


def compiled_draws(shape, seed):
    """`kzoo.backend`'s own draw, compiled: XLA's ThreeFry in TensorFlow's XLA
    steps and on JAX (torch uses Keras' draw, tested through the layer above)."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        draw = jax.jit(lambda s: jax_backend.uniform_threefry(shape, s))
        return np.asarray(draw(np.asarray(seed, "uint32")))
    if backend != "tensorflow":
        pytest.skip("torch draws with Keras' own call")
    import tensorflow as tf

    draw = tf.function(lambda s: tensorflow_backend.uniform_in_xla(shape, s), jit_compile=True)
    return draw(tf.constant(seed, "int64")).numpy()


def test_compiled_draws_fill_both_bit_fields_uniformly():
    """XLA's ThreeFry draws (TensorFlow, JAX): the 11 high and 12 low bits the layer reads (floor and frac of 2048 u)
    are each uniform (chi-square within 5 sigma of its mean); two seeds give
    uncorrelated draws, one seed the same draws."""
    u = compiled_draws((256, 1024), [3, 0]).ravel()
    assert u.dtype == np.float32 and 0 <= u.min() and u.max() < 1
    high = np.floor(u * 2048)
    low = np.floor((u * 2048 - high) * 4096)
    for values, bins in ((high, 2048), (low, 4096)):
        counts = np.bincount(values.astype(int), minlength=bins)
        expected = u.size / bins
        chi_square = ((counts - expected) ** 2 / expected).sum()
        assert abs(chi_square - (bins - 1)) < 5 * np.sqrt(2 * (bins - 1)), (bins, chi_square)
    other = compiled_draws((256, 1024), [3, 1]).ravel()
    assert abs(np.corrcoef(u, other)[0, 1]) < 5 / np.sqrt(u.size)
    np.testing.assert_array_equal(compiled_draws((256, 1024), [3, 0]).ravel(), u)


def xla_step(layer):
    """`layer(x, training=True)` compiled with XLA, its seed state carried between calls."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        call = jax.jit(lambda state, x: layer.stateless_call([], state, x, training=True))
        state = [variable.value for variable in layer.non_trainable_variables]

        def step(x):
            nonlocal state
            y, state = call(state, x)
            return np.asarray(y)

        return step
    if backend != "tensorflow":
        pytest.skip("XLA steps (TensorFlow, JAX) only")
    import tensorflow as tf

    compiled = tf.function(lambda x: layer(x, training=True), jit_compile=True)
    return lambda x: compiled(x).numpy()


def test_layer_in_an_xla_step_drops_at_the_rate_with_new_masks():
    step = xla_step(Dropout(0.1, seed=5))
    x = np.ones((64, 2048), "float32")
    first, second = step(x), step(x)
    applied = 205 / 2048
    sigma = np.sqrt(applied * (1 - applied) / first.size)
    assert abs((first == 0).mean() - applied) < 5 * sigma
    np.testing.assert_allclose(np.unique(first[first != 0]), [2048 / 1843], rtol=1e-6)
    assert np.mean((first == 0) != (second == 0)) > 0.1  # the seed generator moves on inside XLA too
