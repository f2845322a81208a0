import re

import keras
import numpy as np
import pytest
from keras import ops

from kzoo.layers import TokenEmbedding
from tests.test_case import run_layer_test, to_numpy

VOCABULARY, HIDDEN = 11, 6
IDS = np.array([[1, 2, 3, 0], [10, 4, 4, 7]], "int32")


def out_of_range_message(low, high, vocabulary=VOCABULARY, name="tokens"):
    return (
        f"`{name}` ids must lie in [0, {vocabulary}) (the embedding table has {vocabulary} "
        f"rows), but got values from {low} to {high}. Check that the vocabulary of the tokenizer "
        "matches the `vocabulary_size` of the model."
    )


def built_embedding(**kwargs):
    layer = TokenEmbedding(VOCABULARY, HIDDEN, name="tokens", **kwargs)
    layer(IDS)
    return layer


def test_layer_checks_ids(tmp_path):
    run_layer_test(
        TokenEmbedding,
        {"input_dim": VOCABULARY, "output_dim": HIDDEN},
        {"inputs": IDS},
        expected_output_shape=(2, 4, HIDDEN),
        tmp_path=tmp_path,
    )


def test_layer_checks_reverse(tmp_path):
    run_layer_test(
        TokenEmbedding,
        {"input_dim": VOCABULARY, "output_dim": HIDDEN},
        {"inputs": np.random.rand(2, 4, HIDDEN).astype("float32")},
        expected_output_shape=(2, 4, VOCABULARY),
        call_kwargs={"reverse": True},
        tmp_path=tmp_path,
    )


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_reverse_in_mixed_precision(policy):
    compute_dtype = policy.split("_")[1]
    layer = TokenEmbedding(VOCABULARY, HIDDEN, dtype=policy)
    hidden = layer(IDS)  # hidden states in the compute dtype, as a model produces them
    assert keras.backend.standardize_dtype(hidden.dtype) == compute_dtype
    assert keras.backend.standardize_dtype(layer.embeddings.dtype) == "float32"
    logits = layer(hidden, reverse=True)
    assert keras.backend.standardize_dtype(logits.dtype) == compute_dtype
    table = to_numpy(layer.embeddings).astype("float64")
    expected = table[IDS] @ table.T
    actual = to_numpy(ops.cast(logits, "float32"))
    np.testing.assert_allclose(actual, expected, atol=1e-2 * np.abs(expected).max(), rtol=0)


def test_forward_reads_rows():
    layer = built_embedding()
    table = to_numpy(layer.embeddings)
    assert table.shape == (VOCABULARY, HIDDEN)
    np.testing.assert_array_equal(to_numpy(layer(IDS)), table[IDS])


@pytest.mark.parametrize("ids_dtype", ["int32", "int64", "uint8"])
def test_forward_accepts_integer_dtypes(ids_dtype):
    layer = built_embedding()
    np.testing.assert_array_equal(
        to_numpy(layer(IDS.astype(ids_dtype))), to_numpy(layer.embeddings)[IDS]
    )


def test_reverse_is_hidden_times_embeddings_transposed():
    # Sec. 3.4 weight tying: logits = h W_e^T with the same matrix as the input embedding.
    layer = built_embedding()
    hidden = np.random.default_rng(0).normal(size=(2, 4, HIDDEN)).astype("float32")
    expected = hidden.astype("float64") @ to_numpy(layer.embeddings).astype("float64").T
    logits = to_numpy(layer(hidden, reverse=True))
    assert logits.shape == (2, 4, VOCABULARY)
    np.testing.assert_allclose(logits, expected, atol=1e-5, rtol=0)
    assert len(layer.weights) == 1  # tied: one matrix


def test_untied_reverse_uses_its_own_matrix():
    layer = built_embedding(tie_weights=False)
    hidden = np.random.default_rng(0).normal(size=(2, 4, HIDDEN)).astype("float32")
    reverse = to_numpy(layer.reverse_embeddings)
    assert reverse.shape == (HIDDEN, VOCABULARY)
    logits = to_numpy(layer(hidden, reverse=True))
    np.testing.assert_allclose(logits, hidden.astype("float64") @ reverse, atol=1e-5, rtol=0)
    tied = hidden.astype("float64") @ to_numpy(layer.embeddings).T
    assert np.max(np.abs(logits - tied)) > 1e-3


@pytest.mark.parametrize(
    "ids,low,high",
    [
        ([[1, VOCABULARY]], 1, VOCABULARY),  # one past the end
        ([[0, 3], [2, 1000]], 0, 1000),
        ([[-1, 2]], -1, 2),  # JAX would wrap -1 to the last row
        ([[-5, VOCABULARY + 2]], -5, VOCABULARY + 2),
    ],
)
def test_out_of_range_ids_raise_the_same_error_on_every_backend(ids, low, high):
    """PITFALLS: on JAX, Keras' Embedding returns NaN rows for such ids instead of raising."""
    layer = built_embedding()
    with pytest.raises(ValueError, match=re.escape(out_of_range_message(low, high))):
        layer(np.array(ids, "int32"))
    # Also when the ids arrive as a backend tensor.
    with pytest.raises(ValueError, match=re.escape(out_of_range_message(low, high))):
        layer(ops.convert_to_tensor(np.array(ids, "int32")))


def test_boundary_ids_are_accepted():
    layer = built_embedding()
    table = to_numpy(layer.embeddings)
    output = to_numpy(layer(np.array([[0, VOCABULARY - 1]], "int32")))
    np.testing.assert_array_equal(output, table[[[0, VOCABULARY - 1]]])
    assert np.all(np.isfinite(output))


def test_reverse_does_not_check_values():
    # Hidden states are not ids: large values must not trigger the id check.
    layer = built_embedding()
    hidden = np.full((1, 2, HIDDEN), 1e3, "float32")
    expected = hidden.astype("float64") @ to_numpy(layer.embeddings).T
    np.testing.assert_allclose(to_numpy(layer(hidden, reverse=True)), expected, rtol=1e-5)


def test_save_and_load_keep_embeddings_and_logits(tmp_path):
    ids = keras.Input(shape=(4,), dtype="int32")
    layer = TokenEmbedding(VOCABULARY, HIDDEN, name="tokens")
    model = keras.Model(ids, layer(layer(ids), reverse=True))
    expected = to_numpy(model(IDS))
    path = str(tmp_path / "tied.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    loaded_layer = loaded.get_layer("tokens")
    assert isinstance(loaded_layer, TokenEmbedding)
    np.testing.assert_array_equal(to_numpy(loaded_layer.embeddings), to_numpy(layer.embeddings))
    np.testing.assert_allclose(to_numpy(loaded(IDS)), expected, atol=1e-6, rtol=0)
    # The loaded layer still validates ids.
    with pytest.raises(ValueError, match=re.escape(out_of_range_message(1, VOCABULARY))):
        loaded_layer(np.array([[1, VOCABULARY]], "int32"))
