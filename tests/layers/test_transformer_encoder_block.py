import numpy as np
import pytest

from kzoo.layers import TransformerEncoderBlock, causal_attention_mask
from tests.layers import numpy_reference as ref
from tests.test_case import run_layer_test, to_numpy

BATCH, LENGTH, HIDDEN = 2, 5, 8
PADDING = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], "int32")


def inputs(seed=0):
    return np.random.default_rng(seed).normal(size=(BATCH, LENGTH, HIDDEN)).astype("float32")


def built_block(x, seed=1, **kwargs):
    kwargs.setdefault("num_heads", 2)
    kwargs.setdefault("intermediate_dim", 16)
    # Overwritten below; "zeros" spares JAX compiling a random initializer per shape.
    block = TransformerEncoderBlock(kernel_initializer="zeros", **kwargs)
    block.build(x.shape)
    return ref.randomize_weights(block, seed=seed)


def test_layer_checks(tmp_path):
    run_layer_test(
        TransformerEncoderBlock,
        {"num_heads": 2, "intermediate_dim": 16, "attention_dropout": 0.1},
        {"inputs": inputs(), "padding_mask": PADDING},
        expected_output_shape=(BATCH, LENGTH, HIDDEN),
        tmp_path=tmp_path,
    )


def test_config_keeps_every_argument():
    arguments = {
        "num_heads": 4, "intermediate_dim": 12, "key_dim": 3, "value_dim": 5, "dropout": 0.2,
        "attention_dropout": 0.1, "activation": "gelu_approximate", "layer_norm_epsilon": 1e-12,
        "normalize_first": True,
    }
    config = TransformerEncoderBlock(**arguments).get_config()
    assert {name: config[name] for name in arguments} == arguments
    assert TransformerEncoderBlock.from_config(config).get_config() == config


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("use_padding", [False, True], ids=["no_mask", "padding"])
def test_post_ln_matches_numpy(use_padding, activation):
    # Sec. 3.1: y = LN(x + MHA(x)), out = LN(y + FFN(y)); dropout (0.1 by default) is off.
    x = inputs()
    block = built_block(x, activation=activation)
    padding = PADDING if use_padding else None
    expected = ref.encoder_block(block, x, mask=padding)
    np.testing.assert_allclose(
        to_numpy(block(x, padding_mask=padding)), expected, atol=1e-5, rtol=0
    )
    np.testing.assert_allclose(
        to_numpy(block(x, padding_mask=padding, training=False)), expected, atol=1e-5, rtol=0
    )


def test_pre_ln_matches_numpy():
    # normalize_first: y = x + MHA(LN(x)), out = y + FFN(LN(y)).
    x = inputs()
    block = built_block(x, normalize_first=True)
    expected = ref.encoder_block(block, x, mask=PADDING)
    np.testing.assert_allclose(
        to_numpy(block(x, padding_mask=PADDING)), expected, atol=1e-5, rtol=0
    )
    block.normalize_first = False  # the two formulas really differ on these weights
    assert np.max(np.abs(ref.encoder_block(block, x, mask=PADDING) - expected)) > 1e-2


def test_attention_mask_is_combined_with_padding():
    x = inputs()
    block = built_block(x)
    causal = causal_attention_mask(LENGTH, LENGTH)
    mask = ref.causal_mask(LENGTH, LENGTH) & PADDING.astype(bool)[:, None, :]
    expected = ref.encoder_block(block, x, mask=mask)
    output = to_numpy(block(x, padding_mask=PADDING, attention_mask=causal))
    np.testing.assert_allclose(output, expected, atol=1e-5, rtol=0)


def test_padding_invariance():
    x = inputs()
    block = built_block(x)
    output = to_numpy(block(x, padding_mask=PADDING))
    changed = x.copy()
    changed[PADDING == 0] = np.random.default_rng(7).normal(size=changed[PADDING == 0].shape) * 10
    changed_output = to_numpy(block(changed, padding_mask=PADDING))
    real = PADDING == 1
    np.testing.assert_allclose(changed_output[real], output[real], atol=1e-5, rtol=0)
    # Without the mask the padded tokens do leak into the real positions.
    assert np.max(np.abs(to_numpy(block(changed))[real] - to_numpy(block(x))[real])) > 1e-2


def test_fully_padded_sequence_is_finite():
    x = inputs()
    block = built_block(x)
    output = to_numpy(block(x, padding_mask=np.zeros((BATCH, LENGTH), "int32")))
    assert np.all(np.isfinite(output))


def test_attention_scores():
    x = inputs()
    block = built_block(x)
    output, scores = block(x, padding_mask=PADDING, return_attention_scores=True)
    np.testing.assert_allclose(
        to_numpy(output), to_numpy(block(x, padding_mask=PADDING)), atol=1e-5, rtol=0
    )
    scores = ref.as_float64(scores)
    assert scores.shape == (BATCH, 2, LENGTH, LENGTH)
    _, expected = ref.multi_head_attention(block.self_attention, x, mask=PADDING)
    np.testing.assert_allclose(scores, expected, atol=1e-5, rtol=0)
    assert np.all(scores[1, :, :, 3:] < 1e-6)


def test_dropout_only_in_training():
    x = inputs()
    block = built_block(x, dropout=0.3, attention_dropout=0.3)
    inference = to_numpy(block(x, training=False))
    np.testing.assert_array_equal(to_numpy(block(x, training=False)), inference)
    np.testing.assert_allclose(inference, ref.encoder_block(block, x), atol=1e-5, rtol=0)
    assert np.max(np.abs(to_numpy(block(x, training=True)) - inference)) > 1e-2


def test_hidden_size_not_divisible_by_heads_raises():
    with pytest.raises(ValueError, match="d_model=8 is not divisible by num_heads=3"):
        TransformerEncoderBlock(num_heads=3, intermediate_dim=16)(inputs())


def test_explicit_key_dim_allows_any_hidden_size():
    # d_k chosen freely (Table 3 row (B) style): 3 heads of size 4 on d_model = 8.
    x = inputs()
    block = built_block(x, num_heads=3, key_dim=4)
    assert tuple(block.self_attention.query_dense.kernel.shape) == (HIDDEN, 3, 4)
    assert tuple(block.self_attention.value_dense.kernel.shape) == (HIDDEN, 3, 4)
    assert tuple(block.self_attention.output_dense.kernel.shape) == (3, 4, HIDDEN)
    output = to_numpy(block(x, padding_mask=PADDING))
    assert output.shape == (BATCH, LENGTH, HIDDEN)
    np.testing.assert_allclose(output, ref.encoder_block(block, x, mask=PADDING), atol=1e-5, rtol=0)


@pytest.mark.parametrize("normalize_first", [False, True], ids=["post_ln", "pre_ln"])
def test_output_positions_are_the_rows_of_the_full_output(normalize_first):
    # Only the queries are gathered; keys and values still span the sequence,
    # so the rows equal the full output's at those positions (repeats allowed).
    x = inputs()
    block = built_block(x, normalize_first=normalize_first)
    positions = np.array([[4, 0, 4], [2, 1, 0]], "int32")
    full = to_numpy(block(x, padding_mask=PADDING))
    rows = to_numpy(block(x, padding_mask=PADDING, output_positions=positions))
    assert rows.shape == (BATCH, 3, HIDDEN)
    expected = np.take_along_axis(full, positions[:, :, None], axis=1)
    np.testing.assert_allclose(rows, expected, atol=1e-5, rtol=0)
    # The other positions' states matter as keys: changing one changes the rows.
    changed = x.copy()
    changed[:, 3] = np.random.default_rng(3).normal(size=(BATCH, HIDDEN))
    moved = to_numpy(block(changed, padding_mask=PADDING, output_positions=positions))
    assert np.max(np.abs(moved[0] - rows[0])) > 1e-3


def test_output_positions_with_a_full_attention_mask():
    x = inputs()
    block = built_block(x)
    causal = causal_attention_mask(LENGTH, LENGTH)
    positions = np.array([[1, 3], [4, 2]], "int32")
    full = to_numpy(block(x, padding_mask=PADDING, attention_mask=causal))
    rows, scores = block(
        x,
        padding_mask=PADDING,
        attention_mask=causal,
        output_positions=positions,
        return_attention_scores=True,
    )
    expected = np.take_along_axis(full, positions[:, :, None], axis=1)
    np.testing.assert_allclose(to_numpy(rows), expected, atol=1e-5, rtol=0)
    scores = ref.as_float64(scores)
    assert scores.shape == (BATCH, 2, 2, LENGTH)
    assert np.all(scores[0, :, 0, 2:] < 1e-6)  # position 1 sees keys 0..1 only
    assert np.all(scores[1, :, 1, 3:] < 1e-6)  # position 2 sees keys 0..2
