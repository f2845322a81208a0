import numpy as np
import pytest
from keras import ops

from kzoo.layers import TransformerDecoderBlock
from tests.layers import numpy_reference as ref
from tests.test_case import run_layer_test, to_numpy

BATCH, TARGET, SOURCE, HIDDEN, HEADS = 2, 5, 7, 8, 2
ENCODER_PADDING = np.array([[1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 0, 0, 0]], "int32")


def sequences(seed=0):
    rng = np.random.default_rng(seed)
    target = rng.normal(size=(BATCH, TARGET, HIDDEN)).astype("float32")
    memory = rng.normal(size=(BATCH, SOURCE, HIDDEN)).astype("float32")
    return target, memory


def built_block(target, memory, seed=1, **kwargs):
    kwargs.setdefault("num_heads", HEADS)
    kwargs.setdefault("intermediate_dim", 16)
    # Overwritten below; "zeros" spares JAX compiling a random initializer per shape.
    block = TransformerDecoderBlock(kernel_initializer="zeros", **kwargs)
    block.build(target.shape, memory.shape)
    return ref.randomize_weights(block, seed=seed)


def test_layer_checks(tmp_path):
    target, memory = sequences()
    run_layer_test(
        TransformerDecoderBlock,
        # Residual dropout (0.1 by default) is active in the training check; attention
        # dropout is trained through the encoder block's checks.
        {"num_heads": HEADS, "intermediate_dim": 16},
        {"decoder_sequence": target, "encoder_sequence": memory},
        expected_output_shape=(BATCH, TARGET, HIDDEN),
        tmp_path=tmp_path,
    )


@pytest.mark.parametrize("normalize_first", [False, True], ids=["post_ln", "pre_ln"])
def test_matches_numpy(normalize_first):
    target, memory = sequences()
    block = built_block(target, memory, normalize_first=normalize_first)
    decoder_padding = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]], "int32")
    for padding in (
        {},
        {"encoder_padding_mask": ENCODER_PADDING},
        {"encoder_padding_mask": ENCODER_PADDING, "decoder_padding_mask": decoder_padding},
    ):
        expected = ref.decoder_block(block, target, memory, **padding)
        output = to_numpy(block(target, memory, training=False, **padding))
        np.testing.assert_allclose(output, expected, atol=1e-5, rtol=0)


def test_use_causal_mask_false_is_bidirectional():
    target, memory = sequences()
    block = built_block(target, memory)
    causal = to_numpy(block(target, memory))
    bidirectional = to_numpy(block(target, memory, use_causal_mask=False))
    # Identical at the last position (it sees everything either way), different before.
    np.testing.assert_allclose(bidirectional[:, -1], causal[:, -1], atol=1e-5, rtol=0)
    assert np.max(np.abs(bidirectional[:, 0] - causal[:, 0])) > 1e-2


@pytest.mark.parametrize("position", [1, 2, 4])
def test_causality(position):
    target, memory = sequences()
    block = built_block(target, memory)
    output = to_numpy(block(target, memory))
    later = target.copy()
    later[:, position:] += np.random.default_rng(3).normal(size=later[:, position:].shape) * 5
    changed = to_numpy(block(later, memory))
    np.testing.assert_allclose(changed[:, :position], output[:, :position], atol=1e-6, rtol=0)
    assert np.min(np.max(np.abs(changed[:, position:] - output[:, position:]), axis=-1)) > 1e-3


def test_earlier_positions_change_later_outputs():
    target, memory = sequences()
    block = built_block(target, memory)
    output = to_numpy(block(target, memory))
    earlier = target.copy()
    earlier[:, 0] += 3.0
    changed = to_numpy(block(earlier, memory))
    # Every later position attends to position 0.
    assert np.min(np.max(np.abs(changed[:, 1:] - output[:, 1:]), axis=-1)) > 1e-3


def test_encoder_padding_invariance():
    target, memory = sequences()
    block = built_block(target, memory)
    output = to_numpy(block(target, memory, encoder_padding_mask=ENCODER_PADDING))
    changed = memory.copy()
    changed[ENCODER_PADDING == 0] = 50.0
    np.testing.assert_allclose(
        to_numpy(block(target, changed, encoder_padding_mask=ENCODER_PADDING)),
        output, atol=1e-5, rtol=0,
    )
    # Without the mask the padded memory positions matter.
    assert np.max(np.abs(to_numpy(block(target, changed)) - to_numpy(block(target, memory)))) > 1e-2


@pytest.mark.parametrize("normalize_first", [False, True], ids=["post_ln", "pre_ln"])
def test_incremental_decoding_matches_full_pass(normalize_first):
    target, memory = sequences()
    block = built_block(target, memory, normalize_first=normalize_first)
    full = to_numpy(block(target, memory, encoder_padding_mask=ENCODER_PADDING))
    key_dim = HIDDEN // HEADS
    self_cache = (
        ops.zeros((BATCH, TARGET, HEADS, key_dim), "float32"),
        ops.zeros((BATCH, TARGET, HEADS, key_dim), "float32"),
    )
    cross_cache = block.cross_attention.compute_key_value(memory)
    for step in range(TARGET):
        output, self_cache = block(
            target[:, step : step + 1],
            encoder_padding_mask=ENCODER_PADDING,
            self_attention_cache=self_cache,
            self_attention_cache_update_index=step,
            cross_attention_cache=cross_cache,
        )
        assert tuple(output.shape) == (BATCH, 1, HIDDEN)
        np.testing.assert_allclose(to_numpy(output)[:, 0], full[:, step], atol=1e-5, rtol=0)
    keys, _ = block.self_attention.compute_key_value(
        block.self_attention_layer_norm(target) if normalize_first else target
    )
    np.testing.assert_allclose(to_numpy(self_cache[0]), to_numpy(keys), atol=1e-5, rtol=0)


def test_cached_step_with_encoder_sequence_and_scores():
    # Passing the memory instead of the cross cache gives the same step; the outputs come
    # back as (output, scores, cache).
    target, memory = sequences()
    block = built_block(target, memory)
    full = to_numpy(block(target, memory))
    self_cache = tuple(ops.zeros((BATCH, TARGET, HEADS, HIDDEN // HEADS)) for _ in range(2))
    for step in range(2):
        output, scores, self_cache = block(
            target[:, step : step + 1],
            memory,
            self_attention_cache=self_cache,
            self_attention_cache_update_index=step,
            return_attention_scores=True,
        )
        np.testing.assert_allclose(to_numpy(output)[:, 0], full[:, step], atol=1e-5, rtol=0)
        self_scores = ref.as_float64(scores["self_attention"])
        assert self_scores.shape == (BATCH, HEADS, 1, TARGET)
        assert np.all(self_scores[..., step + 1 :] < 1e-6)
        assert tuple(scores["cross_attention"].shape) == (BATCH, HEADS, 1, SOURCE)


def test_attention_scores():
    target, memory = sequences()
    block = built_block(target, memory)
    output, scores = block(
        target, memory, encoder_padding_mask=ENCODER_PADDING, return_attention_scores=True
    )
    np.testing.assert_allclose(
        to_numpy(output),
        ref.decoder_block(block, target, memory, encoder_padding_mask=ENCODER_PADDING),
        atol=1e-5, rtol=0,
    )
    assert sorted(scores) == ["cross_attention", "self_attention"]
    self_scores = ref.as_float64(scores["self_attention"])
    cross_scores = ref.as_float64(scores["cross_attention"])
    assert self_scores.shape == (BATCH, HEADS, TARGET, TARGET)
    assert cross_scores.shape == (BATCH, HEADS, TARGET, SOURCE)
    future = np.triu(np.ones((TARGET, TARGET), bool), k=1)
    assert np.all(self_scores[..., future] < 1e-6)
    padded = np.broadcast_to(ENCODER_PADDING[:, None, None, :] == 0, cross_scores.shape)
    assert padded.sum() == HEADS * TARGET * 4
    assert np.all(cross_scores[padded] < 1e-6)
    np.testing.assert_allclose(self_scores.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(cross_scores.sum(-1), 1.0, atol=1e-5)
    # The self-attention probabilities are those of the first sub-layer, on the raw input.
    _, expected = ref.multi_head_attention(
        block.self_attention, target, mask=ref.causal_mask(TARGET, TARGET)
    )
    np.testing.assert_allclose(self_scores, expected, atol=1e-5, rtol=0)


def test_dropout_only_in_training():
    target, memory = sequences()
    block = built_block(target, memory, dropout=0.3)
    inference = to_numpy(block(target, memory, training=False))
    np.testing.assert_array_equal(to_numpy(block(target, memory, training=False)), inference)
    np.testing.assert_allclose(inference, ref.decoder_block(block, target, memory), atol=1e-5)
    assert np.max(np.abs(to_numpy(block(target, memory, training=True)) - inference)) > 1e-2


def test_missing_encoder_sequence_and_cache_raises():
    target, memory = sequences()
    block = built_block(target, memory)
    with pytest.raises(ValueError, match="needs the encoder output"):
        block(target)
    with pytest.raises(ValueError, match="cross_attention_cache"):
        TransformerDecoderBlock(num_heads=HEADS, intermediate_dim=16)(target)
