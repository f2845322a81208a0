import keras
import numpy as np
import pytest
from keras import ops

from kzoo.layers import MultiHeadAttention, causal_attention_mask, padding_attention_mask
from tests.layers import numpy_reference as ref
from tests.test_case import run_layer_test, to_numpy

BATCH, QUERY_LENGTH, KEY_LENGTH, DIM = 2, 5, 7, 8
PADDING = np.array([[1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0, 0]])  # (B, KEY_LENGTH)


def random_array(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def build_attention(query, value=None, key=None, seed=1, **kwargs):
    """A built layer with random kernels and biases (the default zero biases hide bugs)."""
    kwargs.setdefault("num_heads", 2)
    kwargs.setdefault("key_dim", 4)
    # Overwritten below; "zeros" spares JAX compiling a random initializer per shape.
    layer = MultiHeadAttention(kernel_initializer="zeros", **kwargs)
    value = query if value is None else value
    layer.build(query.shape, value.shape, value.shape if key is None else key.shape)
    return ref.randomize_weights(layer, seed=seed)


def scores_call(layer, *args, **kwargs):
    """The explicit path: `(output, probabilities)` as numpy."""
    output, scores = layer(*args, return_attention_scores=True, **kwargs)
    return to_numpy(output), ref.as_float64(scores)


def assert_close(actual, expected, atol=1e-5):
    np.testing.assert_allclose(ref.as_float64(actual), expected, atol=atol, rtol=0)


# Shared checks.


def test_layer_checks(tmp_path):
    # Cross-attention, a mask and d_k != d_v in one go. Self-attention with attention
    # dropout is trained and saved through the encoder block's checks; leaving dropout out
    # here saves JAX ~3 s of compiling.
    run_layer_test(
        MultiHeadAttention,
        {"num_heads": 2, "key_dim": 4, "value_dim": 6, "output_dim": 5},
        {
            "query": random_array(BATCH, QUERY_LENGTH, DIM),
            "value": random_array(BATCH, KEY_LENGTH, 10, seed=1),
            "attention_mask": PADDING[:, None, :].astype(bool),
        },
        expected_output_shape=(BATCH, QUERY_LENGTH, 5),
        tmp_path=tmp_path,
    )


def test_config_keeps_every_argument():
    layer = MultiHeadAttention(
        num_heads=3, key_dim=4, value_dim=6, output_dim=5, dropout=0.2, use_bias=False, name="mha"
    )
    config = layer.get_config()
    for name, value in {
        "num_heads": 3, "key_dim": 4, "value_dim": 6, "output_dim": 5, "dropout": 0.2,
        "use_bias": False, "name": "mha",
    }.items():
        assert config[name] == value
    # value_dim defaults to key_dim.
    assert MultiHeadAttention(num_heads=2, key_dim=4).get_config()["value_dim"] == 4


# Eq. 1 against numpy.


def test_default_initializer_draws_as_torch_multihead_attention():
    """q/k/v kernels: one Xavier-uniform over the stacked (3d, d) projection, as
    `torch.nn.MultiheadAttention` draws them, so each bound is sqrt(6 / 4d); W^O
    keeps Glorot-uniform's sqrt(6 / 2d). Uniform samples: std = bound / sqrt(3)."""
    d = 128
    layer = MultiHeadAttention(num_heads=4, key_dim=32)
    layer.build((None, None, d))
    kernels = {name: to_numpy(getattr(layer, name).kernel) for name in
               ("query_dense", "key_dense", "value_dense", "output_dense")}
    for name, kernel in kernels.items():
        bound = np.sqrt(6 / (2 * d if name == "output_dense" else 4 * d))
        assert np.abs(kernel).max() <= bound, name
        # 16,384 draws: the sample std is within 1.5% of the true one (~6 sigma).
        np.testing.assert_allclose(kernel.std(), bound / np.sqrt(3), rtol=0.015, err_msg=name)
    assert not np.allclose(kernels["query_dense"], kernels["key_dense"])
    # A given initializer still draws all four.
    layer = MultiHeadAttention(num_heads=4, key_dim=32, kernel_initializer="ones")
    layer.build((None, None, d))
    assert all(to_numpy(layer.query_dense.kernel).ravel() == 1)


def test_self_attention_matches_numpy():
    x = random_array(BATCH, QUERY_LENGTH, DIM)
    layer = build_attention(x)
    expected, probabilities = ref.multi_head_attention(layer, x)
    assert_close(layer(x), expected)  # fused path
    output, scores = scores_call(layer, x)  # explicit path
    assert_close(output, expected)
    assert_close(scores, probabilities)


def test_cross_attention_matches_numpy():
    # Different key length and different input sizes for the query and the memory.
    query = random_array(BATCH, QUERY_LENGTH, DIM)
    memory = random_array(BATCH, KEY_LENGTH, 10, seed=1)
    layer = build_attention(query, memory)
    expected, probabilities = ref.multi_head_attention(layer, query, memory)
    assert expected.shape == (BATCH, QUERY_LENGTH, DIM)
    assert_close(layer(query, memory), expected)
    output, scores = scores_call(layer, query, memory)
    assert scores.shape == (BATCH, 2, QUERY_LENGTH, KEY_LENGTH)
    assert_close(output, expected)
    assert_close(scores, probabilities)


def test_separate_key_input_matches_numpy():
    query = random_array(BATCH, QUERY_LENGTH, DIM)
    value = random_array(BATCH, KEY_LENGTH, 10, seed=1)
    key = random_array(BATCH, KEY_LENGTH, 10, seed=2)
    layer = build_attention(query, value, key)
    expected, _ = ref.multi_head_attention(layer, query, value, key)
    assert_close(layer(query, value, key), expected)
    # The key really is used: the same call without it differs.
    layer_without_key, _ = ref.multi_head_attention(layer, query, value)
    assert np.max(np.abs(layer_without_key - expected)) > 1e-3


@pytest.mark.parametrize("use_mask", [False, True])
def test_key_dim_differs_from_value_dim(use_mask):
    # Table 3 row (B) style: d_k != d_v; output_dim sets W^O's output size.
    query = random_array(BATCH, QUERY_LENGTH, DIM)
    memory = random_array(BATCH, KEY_LENGTH, 10, seed=1)
    mask = padding_attention_mask(PADDING) if use_mask else None
    layer = build_attention(query, memory, key_dim=4, value_dim=6, output_dim=5)
    shapes = {v.path.split("/")[-2] + "/" + v.name: tuple(v.shape) for v in layer.weights}
    assert shapes == {
        "query/kernel": (DIM, 2, 4), "query/bias": (2, 4),
        "key/kernel": (10, 2, 4), "key/bias": (2, 4),
        "value/kernel": (10, 2, 6), "value/bias": (2, 6),
        "attention_output/kernel": (2, 6, 5), "attention_output/bias": (5,),
    }
    expected, probabilities = ref.multi_head_attention(layer, query, memory, mask=mask)
    assert expected.shape == (BATCH, QUERY_LENGTH, 5)
    assert_close(layer(query, memory, attention_mask=mask), expected)
    output, scores = scores_call(layer, query, memory, attention_mask=mask)
    assert_close(output, expected)
    assert_close(scores, probabilities)


def test_without_bias_matches_numpy():
    x = random_array(BATCH, QUERY_LENGTH, DIM)
    layer = build_attention(x, use_bias=False)
    assert len(layer.weights) == 4
    assert all(v.name == "kernel" for v in layer.weights)
    expected, _ = ref.multi_head_attention(layer, x)
    assert_close(layer(x), expected)


MASKS = {
    "padding_2d": lambda: PADDING[:, :QUERY_LENGTH],
    "padding_3d": lambda: padding_attention_mask(PADDING[:, :QUERY_LENGTH]),
    "causal": lambda: causal_attention_mask(QUERY_LENGTH, QUERY_LENGTH),
    "causal_and_padding": lambda: ops.logical_and(
        causal_attention_mask(QUERY_LENGTH, QUERY_LENGTH),
        padding_attention_mask(PADDING[:, :QUERY_LENGTH]),
    ),
    "full_3d": lambda: np.random.default_rng(5).random((BATCH, QUERY_LENGTH, QUERY_LENGTH)) > 0.4,
}


@pytest.mark.parametrize("mask_name", sorted(MASKS))
def test_masked_self_attention_matches_numpy(mask_name):
    x = random_array(BATCH, QUERY_LENGTH, DIM)
    mask = MASKS[mask_name]()
    layer = build_attention(x)
    expected, probabilities = ref.multi_head_attention(layer, x, mask=mask)
    fused = to_numpy(layer(x, attention_mask=mask, training=False))
    output, scores = scores_call(layer, x, attention_mask=mask)
    assert_close(fused, expected)
    assert_close(output, expected)
    np.testing.assert_allclose(fused, output, atol=1e-5, rtol=0)  # fused == explicit
    assert_close(scores, probabilities)

    visible = ref.attention_mask_3d(mask, BATCH, QUERY_LENGTH, QUERY_LENGTH)
    visible = np.broadcast_to(visible[:, None], scores.shape)
    has_keys = np.broadcast_to(visible.any(axis=-1, keepdims=True), scores.shape)
    assert scores.shape == (BATCH, 2, QUERY_LENGTH, QUERY_LENGTH)
    np.testing.assert_allclose(scores.sum(axis=-1), 1.0, atol=1e-5)
    assert np.all(scores[~visible & has_keys] < 1e-6)
    # Masking changes the result (a mask that is ignored would fail here).
    unmasked, _ = ref.multi_head_attention(layer, x)
    assert np.max(np.abs(unmasked - expected)) > 1e-3


def test_masked_keys_do_not_matter():
    query = random_array(BATCH, QUERY_LENGTH, DIM)
    memory = random_array(BATCH, KEY_LENGTH, 10, seed=1)
    layer = build_attention(query, memory)
    output = to_numpy(layer(query, memory, attention_mask=PADDING))
    changed = memory.copy()
    changed[PADDING == 0] = 100.0
    np.testing.assert_allclose(
        to_numpy(layer(query, changed, attention_mask=PADDING)), output, atol=1e-5, rtol=0
    )


# Fully masked rows: finite in every precision, on both paths.


@pytest.mark.parametrize("explicit", [False, True], ids=["fused", "explicit"])
@pytest.mark.parametrize(
    "dtype,atol",
    [("float32", 1e-5), ("mixed_float16", 2e-2), ("mixed_bfloat16", 1.5e-1)],
)
def test_fully_masked_rows_are_finite(dtype, atol, explicit):
    x = random_array(BATCH, QUERY_LENGTH, DIM)
    # Batch 1 is fully padded; batch 0 has its query row 0 fully masked (causal x padding).
    padding = np.array([[0, 1, 1, 1, 0], [0, 0, 0, 0, 0]], bool)
    mask = np.tril(np.ones((QUERY_LENGTH, QUERY_LENGTH), bool))[None] & padding[:, None]
    assert not mask[0, 0].any() and not mask[1].any()
    layer = MultiHeadAttention(num_heads=2, key_dim=4, dtype=dtype, kernel_initializer="zeros")
    layer.build(x.shape)
    ref.randomize_weights(layer, seed=1)
    expected, _ = ref.multi_head_attention(layer, x, mask=mask)  # rows without keys: mask lifted
    if explicit:
        output, scores = layer(x, attention_mask=mask, return_attention_scores=True)
        scores = ref.as_float64(scores)
        assert np.all(np.isfinite(scores))
        np.testing.assert_allclose(scores.sum(axis=-1), 1.0, atol=2e-2)
        # Rows with some visible key still give exactly nothing to the masked ones.
        partly_masked = ~mask & mask.any(axis=-1, keepdims=True)
        assert partly_masked.sum() > 0
        assert np.all(scores.transpose(1, 0, 2, 3)[:, partly_masked] < 1e-6)
    else:
        output = layer(x, attention_mask=mask, training=False)
    assert keras.backend.standardize_dtype(output.dtype) == dtype.replace("mixed_", "")
    output = ref.as_float64(output)
    assert np.all(np.isfinite(output))
    np.testing.assert_allclose(output, expected, atol=atol, rtol=0)


# Dropout on the attention probabilities.


def test_dropout_only_in_training():
    x = random_array(BATCH, QUERY_LENGTH, DIM)
    layer = build_attention(x, dropout=0.5)
    expected, probabilities = ref.multi_head_attention(layer, x)
    inference = to_numpy(layer(x, training=False))
    np.testing.assert_array_equal(to_numpy(layer(x, training=False)), inference)  # deterministic
    np.testing.assert_array_equal(to_numpy(layer(x)), inference)  # training defaults to off
    assert_close(inference, expected)  # no dropout at inference
    trained = to_numpy(layer(x, training=True))
    assert np.max(np.abs(trained - inference)) > 1e-2
    assert np.max(np.abs(to_numpy(layer(x, training=True)) - trained)) > 1e-2  # a fresh draw
    # The returned probabilities are the softmax before dropout.
    _, scores = layer(x, training=True, return_attention_scores=True)
    assert_close(scores, probabilities)


def test_fused_kernel_whenever_dropout_is_inactive(monkeypatch):
    """PITFALLS: Keras' own MHA skips the fused kernel whenever dropout > 0, even at inference."""
    calls = []
    fused = keras.ops.dot_product_attention

    def counting(*args, **kwargs):
        calls.append(1)
        return fused(*args, **kwargs)

    monkeypatch.setattr(keras.ops, "dot_product_attention", counting)
    x = random_array(BATCH, QUERY_LENGTH, DIM)
    layer = build_attention(x, dropout=0.1)
    calls.clear()
    layer(x, training=False)
    assert len(calls) == 1
    layer(x, training=True)
    assert len(calls) == 1  # dropout active: explicit path
    layer(x, training=False, return_attention_scores=True)
    assert len(calls) == 1  # scores requested: explicit path
    no_dropout = build_attention(x, dropout=0.0)
    calls.clear()
    no_dropout(x, training=True)
    assert len(calls) == 1  # rate 0: fused even in training


# Key/value cache.


def decoding_setup(length=QUERY_LENGTH):
    x = random_array(BATCH, length, DIM)
    layer = build_attention(x)
    full = to_numpy(layer(x, attention_mask=causal_attention_mask(length, length)))
    expected, _ = ref.multi_head_attention(layer, x, mask=ref.causal_mask(length, length))
    assert_close(full, expected)
    empty = (
        ops.zeros((BATCH, length, 2, 4), "float32"),
        ops.zeros((BATCH, length, 2, 4), "float32"),
    )
    return x, layer, full, empty


@pytest.mark.parametrize("tensor_index", [False, True], ids=["int_index", "tensor_index"])
def test_incremental_decoding_matches_full_causal_attention(tensor_index):
    length = QUERY_LENGTH
    x, layer, full, cache = decoding_setup(length)
    for step in range(length):
        index = ops.convert_to_tensor(step, "int32") if tensor_index else step
        output, cache = layer(
            x[:, step : step + 1],
            cache=cache,
            cache_update_index=index,
            attention_mask=causal_attention_mask(1, length, query_offset=index),
        )
        assert tuple(output.shape) == (BATCH, 1, DIM)
        assert_close(output[:, 0], full[:, step])
    # The filled cache holds exactly the projected keys and values of the sequence.
    keys, values = layer.compute_key_value(x)
    np.testing.assert_allclose(to_numpy(cache[0]), to_numpy(keys), atol=1e-6, rtol=0)
    np.testing.assert_allclose(to_numpy(cache[1]), to_numpy(values), atol=1e-6, rtol=0)


def test_cache_update_writes_only_its_slot():
    length = QUERY_LENGTH
    x, layer, _, cache = decoding_setup(length)
    _, (keys, values) = layer(
        x[:, 2:4], cache=cache, cache_update_index=2,
        attention_mask=causal_attention_mask(2, length, query_offset=2),
    )
    expected_keys, expected_values = (to_numpy(t) for t in layer.compute_key_value(x[:, 2:4]))
    keys, values = to_numpy(keys), to_numpy(values)
    np.testing.assert_allclose(keys[:, 2:4], expected_keys, atol=1e-6, rtol=0)
    np.testing.assert_allclose(values[:, 2:4], expected_values, atol=1e-6, rtol=0)
    for untouched in (keys[:, :2], keys[:, 4:], values[:, :2], values[:, 4:]):
        np.testing.assert_array_equal(untouched, 0.0)


def test_cache_with_scores_returns_output_scores_cache():
    length = QUERY_LENGTH
    x, layer, full, cache = decoding_setup(length)
    for step in range(3):
        output, scores, cache = layer(
            x[:, step : step + 1], cache=cache, cache_update_index=step,
            attention_mask=causal_attention_mask(1, length, query_offset=step),
            return_attention_scores=True,
        )
        scores = ref.as_float64(scores)
        assert scores.shape == (BATCH, 2, 1, length)
        assert np.all(scores[..., step + 1 :] < 1e-6)  # empty future slots
        np.testing.assert_allclose(scores.sum(axis=-1), 1.0, atol=1e-5)
        assert_close(output[:, 0], full[:, step])


def test_cross_attention_cache_equals_uncached_call():
    query = random_array(BATCH, QUERY_LENGTH, DIM)
    memory = random_array(BATCH, KEY_LENGTH, 10, seed=1)
    layer = build_attention(query, memory, key_dim=4, value_dim=6)
    cache = layer.compute_key_value(memory)
    assert tuple(cache[0].shape) == (BATCH, KEY_LENGTH, 2, 4)
    assert tuple(cache[1].shape) == (BATCH, KEY_LENGTH, 2, 6)
    for mask in (None, PADDING):
        expected = to_numpy(layer(query, memory, attention_mask=mask))
        assert_close(expected, ref.multi_head_attention(layer, query, memory, mask=mask)[0])
        output, returned = layer(query, cache=cache, attention_mask=mask)
        np.testing.assert_allclose(to_numpy(output), expected, atol=1e-6, rtol=0)
        np.testing.assert_array_equal(to_numpy(returned[0]), to_numpy(cache[0]))
        # One decoder position at a time sees the same memory.
        step, _ = layer(query[:, 2:3], cache=cache, attention_mask=mask)
        np.testing.assert_allclose(to_numpy(step)[:, 0], expected[:, 2], atol=1e-5, rtol=0)
