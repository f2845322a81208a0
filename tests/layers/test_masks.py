import numpy as np
import pytest
from keras import ops

from kzoo.layers import (
    causal_attention_mask,
    large_negative_number,
    merge_attention_masks,
    padding_attention_mask,
)
from tests.layers.numpy_reference import causal_mask
from tests.test_case import to_numpy


def test_causal_mask_values():
    mask = to_numpy(causal_attention_mask(4, 4))
    assert mask.dtype == np.bool_
    np.testing.assert_array_equal(mask[0], np.tril(np.ones((4, 4), bool)))
    assert mask.shape == (1, 4, 4)


@pytest.mark.parametrize(
    "query_length,key_length,offset", [(1, 6, 0), (1, 6, 3), (2, 6, 4), (3, 5, 0)]
)
def test_causal_mask_with_offset(query_length, key_length, offset):
    mask = to_numpy(causal_attention_mask(query_length, key_length, query_offset=offset))
    assert mask.shape == (1, query_length, key_length)
    expected = np.array(
        [[key <= query + offset for key in range(key_length)] for query in range(query_length)]
    )
    np.testing.assert_array_equal(mask[0], expected)
    np.testing.assert_array_equal(mask, causal_mask(query_length, key_length, offset))


def test_causal_mask_tensor_offset():
    # Step-by-step decoding passes the step as a tensor.
    offset = ops.convert_to_tensor(2, dtype="int32")
    mask = to_numpy(causal_attention_mask(1, 5, query_offset=offset))
    np.testing.assert_array_equal(mask, [[[True, True, True, False, False]]])


def test_padding_mask_shape_and_values():
    mask = to_numpy(padding_attention_mask(np.array([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]])))
    assert mask.shape == (3, 1, 4)
    assert mask.dtype == np.bool_
    np.testing.assert_array_equal(
        mask[:, 0],
        [[True, True, False, False], [True, True, True, True], [True, False, False, False]],
    )


def test_padding_mask_accepts_booleans_and_nonzero_ints():
    np.testing.assert_array_equal(
        to_numpy(padding_attention_mask(np.array([[True, False]]))), [[[True, False]]]
    )
    # Any non-zero value marks a real token.
    np.testing.assert_array_equal(
        to_numpy(padding_attention_mask(np.array([[2, 0, 7]]))), [[[True, False, True]]]
    )


def test_merge_is_logical_and_with_broadcasting():
    causal = causal_attention_mask(3, 3)  # (1, 3, 3)
    padding = padding_attention_mask(np.array([[1, 1, 0], [1, 0, 0]]))  # (2, 1, 3)
    merged = to_numpy(merge_attention_masks(causal, padding))
    assert merged.shape == (2, 3, 3)
    real_tokens = np.array([[1, 1, 0], [1, 0, 0]], bool)
    expected = np.tril(np.ones((3, 3), bool))[None] & real_tokens[:, None]
    np.testing.assert_array_equal(merged, expected)


def test_merge_skips_none_and_casts():
    only = np.array([[[1, 0], [0, 1]]])
    np.testing.assert_array_equal(
        to_numpy(merge_attention_masks(None, only, None)), only.astype(bool)
    )
    assert to_numpy(merge_attention_masks(None, only)).dtype == np.bool_
    assert merge_attention_masks() is None
    assert merge_attention_masks(None, None) is None
    three = merge_attention_masks(
        np.array([[[1, 1, 1]]]), np.array([[[1, 0, 1]]]), np.array([[[1, 1, 0]]])
    )
    np.testing.assert_array_equal(to_numpy(three), [[[True, False, False]]])


@pytest.mark.parametrize(
    "dtype", ["float16", "mixed_float16", "bfloat16", "mixed_bfloat16", "float32"]
)
def test_large_negative_number_is_finite(dtype):
    value = large_negative_number(dtype)
    compute_dtype = dtype.replace("mixed_", "")
    assert value <= -1e4  # far below any real logit
    as_dtype = ops.cast(ops.convert_to_tensor(value, "float32"), compute_dtype)
    round_trip = to_numpy(ops.cast(as_dtype, "float32"))
    assert np.isfinite(round_trip)
    np.testing.assert_allclose(round_trip, value, rtol=1e-2)  # bfloat16 keeps ~3 digits
    # Finite even added to another large negative bias (finfo.min would overflow).
    doubled = ops.add(ops.cast(value, compute_dtype), ops.cast(value, compute_dtype))
    assert np.isfinite(to_numpy(ops.cast(doubled, "float32")))


def test_large_negative_number_values():
    assert large_negative_number("float16") == -3e4
    assert np.isfinite(np.float16(large_negative_number("float16")))
    assert np.isfinite(np.float16(2 * large_negative_number("float16")))
    assert large_negative_number("float32") == -1e9
    # The float32 value would overflow in float16: the reason for the dtype switch.
    with np.errstate(over="ignore"):
        assert np.isinf(np.float16(large_negative_number("float32")))


def test_large_negative_number_masks_softmax_in_float16():
    logits = np.array([[3.0, 1.0, 0.5]], "float16")
    masked = np.where([[True, False, True]], logits, large_negative_number("float16"))
    masked = ops.convert_to_tensor(masked.astype("float16"))
    probabilities = to_numpy(ops.cast(ops.softmax(masked, axis=-1), "float32"))
    assert np.all(np.isfinite(probabilities))
    assert probabilities[0, 1] == 0.0
    np.testing.assert_allclose(probabilities[0, [0, 2]].sum(), 1.0, atol=1e-3)
