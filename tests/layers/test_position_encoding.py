import re

import keras
import numpy as np
import pytest
from keras import ops

from kzoo.layers import PositionEmbedding, SinusoidalPositionEncoding
from tests.layers.numpy_reference import as_float64
from tests.test_case import run_layer_test, to_numpy


def paper_sinusoids(length, d_model, start_index=0, max_wavelength=10000):
    """Sec. 3.5 in float64: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...)."""
    table = np.zeros((length, d_model))
    for row in range(length):
        pos = row + start_index
        for i in range(d_model // 2):
            angle = pos / max_wavelength ** (2 * i / d_model)
            table[row, 2 * i] = np.sin(angle)
            table[row, 2 * i + 1] = np.cos(angle)
    return table


# SinusoidalPositionEncoding


def test_sinusoidal_layer_checks(tmp_path):
    # No weights, so nothing to train.
    run_layer_test(
        SinusoidalPositionEncoding,
        {},
        {"inputs": np.random.rand(2, 5, 8).astype("float32")},
        expected_output_shape=(5, 8),
        tmp_path=tmp_path,
        check_training=False,
    )
    layer = SinusoidalPositionEncoding(max_wavelength=500)
    layer(np.zeros((1, 2, 4), "float32"))
    assert layer.weights == []
    assert SinusoidalPositionEncoding.from_config(layer.get_config()).max_wavelength == 500


@pytest.mark.parametrize(
    "length,d_model,start_index", [(5, 8, 0), (5, 8, 7), (1, 8, 40), (12, 16, 0)]
)
def test_sinusoidal_matches_paper_formula(length, d_model, start_index):
    inputs = np.zeros((2, length, d_model), "float32")
    encoding = SinusoidalPositionEncoding()(inputs, start_index=start_index)
    assert tuple(encoding.shape) == (length, d_model)
    np.testing.assert_allclose(
        to_numpy(encoding), paper_sinusoids(length, d_model, start_index), atol=1e-5, rtol=0
    )


def test_sinusoidal_layout_is_interleaved():
    # Not the [sin, cos] concatenation of fairseq/tensor2tensor.
    encoding = to_numpy(SinusoidalPositionEncoding()(np.zeros((1, 5, 8), "float32")))
    np.testing.assert_allclose(encoding[0], [0.0, 1.0] * 4, atol=1e-7)
    # d_model = 8: frequencies 1, 1/10, 1/100, 1/1000.
    np.testing.assert_allclose(
        encoding[1, :4], [np.sin(1.0), np.cos(1.0), np.sin(0.1), np.cos(0.1)], atol=1e-6
    )
    np.testing.assert_allclose(encoding[2, 6:], [np.sin(0.002), np.cos(0.002)], atol=1e-6)


def test_sinusoidal_start_index_continues_the_table():
    layer = SinusoidalPositionEncoding()
    full = to_numpy(layer(np.zeros((1, 12, 8), "float32")))
    for start in (3, ops.convert_to_tensor(3, "int32")):
        shifted = to_numpy(layer(np.zeros((1, 5, 8), "float32"), start_index=start))
        np.testing.assert_allclose(shifted, full[3:8], atol=1e-6, rtol=0)


def test_sinusoidal_max_wavelength():
    encoding = SinusoidalPositionEncoding(max_wavelength=100)(np.zeros((1, 5, 8), "float32"))
    np.testing.assert_allclose(
        to_numpy(encoding), paper_sinusoids(5, 8, max_wavelength=100), atol=1e-5, rtol=0
    )
    # A different base gives a different table.
    assert np.max(np.abs(paper_sinusoids(5, 8, max_wavelength=100) - paper_sinusoids(5, 8))) > 0.1


@pytest.mark.parametrize("dtype", ["mixed_bfloat16", "bfloat16"])
def test_sinusoidal_positions_stay_distinct_in_bfloat16(dtype):
    """PITFALLS: a table computed in bfloat16 collapses positions above 256."""
    assert to_numpy(ops.cast(ops.cast(257.0, "bfloat16"), "float32")) == 256.0  # why it matters
    length, d_model = 600, 32
    encoding = SinusoidalPositionEncoding(dtype=dtype)(np.zeros((1, length, d_model), "float32"))
    assert keras.backend.standardize_dtype(encoding.dtype) == "bfloat16"
    table = as_float64(encoding)
    assert np.max(np.abs(table[256] - table[257])) > 0.1
    assert len(np.unique(table, axis=0)) == length  # all 600 rows pairwise distinct
    # Only bfloat16 rounding of the float32 table (2^-9 relative), at every position.
    np.testing.assert_allclose(table, paper_sinusoids(length, d_model), atol=5e-3, rtol=0)


@pytest.mark.parametrize("d_model", [5, 7])
def test_sinusoidal_odd_size_raises(d_model):
    with pytest.raises(ValueError, match=f"even embedding size.*d_model={d_model}"):
        SinusoidalPositionEncoding()(np.zeros((1, 3, d_model), "float32"))


# PositionEmbedding


def test_position_embedding_layer_checks(tmp_path):
    # The output (T, d) has no batch axis, so `run_layer_test`'s fit cannot pair it
    # with per-example targets; training is checked in the next test.
    run_layer_test(
        PositionEmbedding,
        {"max_sequence_length": 8},
        {"inputs": np.random.rand(2, 5, 4).astype("float32")},
        expected_output_shape=(5, 4),
        tmp_path=tmp_path,
        check_training=False,
    )


def test_position_embedding_trains_only_the_rows_it_reads():
    inputs = keras.Input(shape=(5, 4))
    layer = PositionEmbedding(max_sequence_length=8)
    model = keras.Model(inputs, inputs + layer(inputs))
    before = to_numpy(layer.position_embeddings).copy()
    x = np.random.rand(4, 5, 4).astype("float32")
    y = np.random.rand(4, 5, 4).astype("float32")
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    first = model.evaluate(x, y, verbose=0)
    model.fit(x, y, epochs=3, batch_size=4, verbose=0)
    assert model.evaluate(x, y, verbose=0) < first
    after = to_numpy(layer.position_embeddings)
    assert np.all(np.abs(after[:5] - before[:5]).max(axis=-1) > 0)
    np.testing.assert_array_equal(after[5:], before[5:])


def table_layer(max_sequence_length=8, hidden_dim=4):
    layer = PositionEmbedding(max_sequence_length=max_sequence_length)
    layer.build((None, None, hidden_dim))
    table = np.arange(max_sequence_length * hidden_dim, dtype="float32").reshape(-1, hidden_dim)
    layer.position_embeddings.assign(table)
    return layer, table


@pytest.mark.parametrize("length", [1, 5, 8])
def test_position_embedding_returns_first_rows(length):
    layer, table = table_layer()
    output = to_numpy(layer(np.zeros((2, length, 4), "float32")))
    np.testing.assert_array_equal(output, table[:length])


@pytest.mark.parametrize("start", [0, 2, 5])
def test_position_embedding_start_index(start):
    layer, table = table_layer()
    output = to_numpy(layer(np.zeros((1, 3, 4), "float32"), start_index=start))
    np.testing.assert_array_equal(output, table[start : start + 3])
    tensor_start = ops.convert_to_tensor(start, "int32")
    output = to_numpy(layer(np.zeros((1, 3, 4), "float32"), start_index=tensor_start))
    np.testing.assert_array_equal(output, table[start : start + 3])


def test_position_embedding_too_long_raises_with_both_lengths():
    layer, _ = table_layer()
    expected = re.escape("got positions 0 to 8") + ".*" + re.escape("max_sequence_length=8")
    with pytest.raises(ValueError, match=expected):
        layer(np.zeros((1, 9, 4), "float32"))
    # Also inside a compiled predict step of a model built for any length.
    inputs = keras.Input(shape=(None, 4))
    model = keras.Model(inputs, inputs + PositionEmbedding(max_sequence_length=8)(inputs))
    with pytest.raises(ValueError, match=expected):
        model.predict(np.zeros((2, 9, 4), "float32"), verbose=0)


def _runtime_errors():
    """Errors a too-long input may raise from inside a compiled graph: TensorFlow
    reports a run-time assertion (with kzoo's message) as InvalidArgumentError."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return (ValueError, tf.errors.InvalidArgumentError)
    return (ValueError,)


def test_position_embedding_too_long_raises_after_retracing():
    # The second distinct length makes tf.function relax the length to None,
    # so only a run-time check can catch it.
    inputs = keras.Input(shape=(None, 4))
    model = keras.Model(inputs, inputs + PositionEmbedding(max_sequence_length=8)(inputs))
    assert model.predict(np.zeros((2, 8, 4), "float32"), verbose=0).shape == (2, 8, 4)
    assert model.predict(np.zeros((2, 7, 4), "float32"), verbose=0).shape == (2, 7, 4)
    with pytest.raises(_runtime_errors(), match="max_sequence_length=8 positions"):
        model.predict(np.zeros((2, 9, 4), "float32"), verbose=0)


def test_position_embedding_static_too_long_input_raises_when_building():
    with pytest.raises(ValueError, match=re.escape("got positions 0 to 8")):
        PositionEmbedding(max_sequence_length=8)(keras.Input(shape=(9, 4)))


@pytest.mark.parametrize("as_tensor", [False, True])
def test_position_embedding_start_index_past_the_table_raises(as_tensor):
    layer, _ = table_layer()
    start = ops.convert_to_tensor(6, "int32") if as_tensor else 6
    with pytest.raises(ValueError, match=re.escape("got positions 6 to 9") + ".*max_sequence_length=8"):
        layer(np.zeros((1, 4, 4), "float32"), start_index=start)
