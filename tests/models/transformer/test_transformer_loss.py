"""Label-smoothed cross-entropy over integer targets with padding (sec. 5.4), and token metrics."""

import math

import keras
import numpy as np
import pytest
from keras import ops

from kzoo.models.transformer.transformer_loss import (
    LabelSmoothedCrossEntropy,
    MaskedAccuracy,
    TokenPerplexity,
)

LN2 = math.log(2.0)
HALVING = np.log([0.5, 0.25, 0.125, 0.125])  # log-probabilities -1, -2, -3, -3 (× ln 2)


def hand_example():
    """2 sequences × 3 target positions × 4 classes; 0 is padding. Real tokens:
    (0, 0) label 1 under HALVING, (0, 1) label 2 under uniform logits,
    (1, 0) label 3 under HALVING. Padding positions get extreme logits."""
    labels = np.array([[1, 2, 0], [3, 0, 0]])
    padding_logits = [60.0, -60.0, 0.0, 5.0]
    logits = np.array(
        [[HALVING, [0.0] * 4, padding_logits], [HALVING, padding_logits, padding_logits]], "float32"
    )
    return labels, logits


def test_hand_computed_with_padding():
    labels, logits = hand_example()
    # Per token: -(1 - ε)·lp[y] - ε/4 · Σ lp, with Σ lp = -9 ln 2 under HALVING.
    # ε = 0.1: (0, 0): 0.9·2 + 0.1·9/4 = 2.025 ln 2; (0, 1): ln 4 = 2 ln 2;
    # (1, 0): 0.9·3 + 0.225 = 2.925 ln 2. Mean over the 3 real tokens:
    smoothed = (2.025 + 2.0 + 2.925) / 3 * LN2  # 1.605791
    np.testing.assert_allclose(float(LabelSmoothedCrossEntropy(0.1)(labels, logits)), smoothed, rtol=1e-6)
    np.testing.assert_allclose(smoothed, 1.605791, rtol=1e-6)
    # ε = 0: plain cross-entropy, (2 + 2 + 3) / 3 ln 2.
    np.testing.assert_allclose(float(LabelSmoothedCrossEntropy(0.0)(labels, logits)), 7 / 3 * LN2, rtol=1e-6)
    # No reduction: per-token losses, 0 at padding.
    per_token = LabelSmoothedCrossEntropy(0.1, reduction=None)(labels, logits)
    np.testing.assert_allclose(
        ops.convert_to_numpy(per_token), np.array([[2.025, 2.0, 0.0], [2.925, 0.0, 0.0]]) * LN2, rtol=1e-6
    )
    # "sum": the sum over real tokens, for averaging over many batches yourself.
    summed = LabelSmoothedCrossEntropy(0.1, reduction="sum")(labels, logits)
    np.testing.assert_allclose(float(summed), 3 * smoothed, rtol=1e-6)


def random_batch(vocab=7, padding_per_row=(0, 2, 4), length=5, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(1, vocab, size=(len(padding_per_row), length))
    for row, padding in enumerate(padding_per_row):
        labels[row, length - padding :] = 0
    logits = rng.normal(scale=3.0, size=labels.shape + (vocab,)).astype("float32")
    return labels, logits


@pytest.mark.parametrize("smoothing", [0.1, 0.2])
def test_matches_keras_one_hot_categorical_crossentropy(smoothing):
    labels, logits = random_batch()
    real = labels != 0
    reference = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=smoothing)(
        np.eye(7, dtype="float32")[labels[real]], logits[real]
    )
    ours = LabelSmoothedCrossEntropy(label_smoothing=smoothing)(labels, logits)
    np.testing.assert_allclose(float(ours), float(reference), rtol=1e-5)


def test_no_smoothing_is_sparse_categorical_crossentropy_on_real_tokens():
    labels, logits = random_batch(seed=1)
    real = labels != 0
    reference = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(labels[real], logits[real])
    ours = LabelSmoothedCrossEntropy(label_smoothing=0.0)(labels, logits)
    np.testing.assert_allclose(float(ours), float(reference), rtol=1e-5)


def test_does_not_depend_on_padding():
    labels, logits = random_batch(seed=2)
    loss = LabelSmoothedCrossEntropy()
    value = float(loss(labels, logits))
    # 3 more padding positions on every row and 2 rows of only padding, with random logits.
    rng = np.random.default_rng(3)
    more_labels = np.zeros((5, 8), "int64")
    more_labels[:3, :5] = labels
    more_logits = rng.normal(scale=3.0, size=(5, 8, 7)).astype("float32")
    more_logits[:3, :5] = logits
    np.testing.assert_allclose(float(loss(more_labels, more_logits)), value, rtol=1e-6)
    # A padding id other than 0.
    shifted = np.where(labels == 0, 6, labels - 1)
    shifted_logits = np.roll(logits, -1, axis=-1)
    shifted_loss = LabelSmoothedCrossEntropy(padding_id=6)(shifted, shifted_logits)
    np.testing.assert_allclose(float(shifted_loss), value, rtol=1e-6)


def test_all_padding_gives_zero():
    logits = np.random.default_rng(4).normal(size=(2, 3, 5)).astype("float32")
    assert float(LabelSmoothedCrossEntropy()(np.zeros((2, 3), "int32"), logits)) == 0.0


def test_sequence_weights_give_a_weighted_mean_over_real_tokens():
    labels, logits = random_batch(seed=5)  # rows with 5, 3 and 1 real tokens
    per_token = ops.convert_to_numpy(LabelSmoothedCrossEntropy(reduction=None)(labels, logits))
    weights = np.array([1.0, 0.0, 2.0], "float32")
    token_weights = weights[:, None] * (labels != 0)
    expected = (per_token * token_weights).sum() / token_weights.sum()  # (row 0 + 2·row 2) / 7
    weighted = LabelSmoothedCrossEntropy()(labels, logits, sample_weight=weights)
    np.testing.assert_allclose(float(weighted), expected, rtol=1e-6)


def test_float32_under_mixed_precision():
    labels, logits = random_batch(seed=6)
    expected = float(LabelSmoothedCrossEntropy()(labels, logits))
    keras.config.set_dtype_policy("mixed_float16")
    loss = LabelSmoothedCrossEntropy()
    value = loss(labels, ops.cast(logits, "float16"))
    assert keras.backend.standardize_dtype(value.dtype) == "float32"
    np.testing.assert_allclose(float(value), expected, rtol=1e-3)  # float16 logits, float32 sums


def _logits_model(batch, length, vocab):
    """logits[b] = W[b]: a one-hot batch index times a bias-free Dense, so the
    gradient with respect to the logits is the kernel's gradient."""
    model = keras.Sequential(
        [
            keras.Input((batch,)),
            keras.layers.Dense(length * vocab, use_bias=False),
            keras.layers.Reshape((length, vocab)),
        ]
    )
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=1.0), loss=LabelSmoothedCrossEntropy(0.1))
    return model


def test_gradient_is_softmax_minus_smoothed_targets_over_real_tokens():
    labels, logits = random_batch(vocab=6, padding_per_row=(1, 3), length=4, seed=7)
    model = _logits_model(2, 4, 6)
    model.layers[0].set_weights([logits.reshape(2, -1)])
    model.fit(np.eye(2, dtype="float32"), labels, batch_size=2, epochs=1, shuffle=False, verbose=0)
    gradient = (logits.reshape(2, -1) - model.layers[0].get_weights()[0]).reshape(2, 4, 6)
    # d loss / d logits = (softmax - q) / N at real tokens, 0 at padding; q = 0.9·onehot + 0.1/6.
    softmax = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    targets = 0.9 * np.eye(6)[labels] + 0.1 / 6
    expected = (softmax - targets) * (labels != 0)[..., None] / (labels != 0).sum()
    np.testing.assert_allclose(gradient, expected, atol=1e-6)
    assert np.abs(gradient[labels == 0]).max() == 0.0

    # A batch of only padding: loss 0, finite (zero) gradients, weights unchanged.
    weights = model.layers[0].get_weights()[0]
    history = model.fit(np.eye(2, dtype="float32"), np.zeros_like(labels), batch_size=2, epochs=1, verbose=0)
    assert history.history["loss"] == [0.0]
    np.testing.assert_array_equal(model.layers[0].get_weights()[0], weights)


def test_fit_a_tiny_model_with_loss_and_metrics():
    # Predict each target token from the same position's input token (a copy task) with padding.
    vocab, length = 8, 6
    rng = np.random.default_rng(8)
    tokens = rng.integers(1, vocab, size=(64, length))
    tokens[np.arange(length)[None, :] >= rng.integers(2, length + 1, size=(64, 1))] = 0
    model = keras.Sequential(
        [keras.Input((length,), dtype="int32"), keras.layers.Embedding(vocab, 16), keras.layers.Dense(vocab)]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(0.05),
        loss=LabelSmoothedCrossEntropy(0.1),
        metrics=[MaskedAccuracy(), TokenPerplexity()],
    )
    history = model.fit(tokens, tokens, batch_size=32, epochs=15, verbose=0).history
    assert history["loss"][0] > 1.5 and history["loss"][-1] < 0.6  # uniform: log 8 = 2.08
    assert history["masked_accuracy"][-1] == 1.0
    assert history["perplexity"][-1] < 1.2
    # The smoothed loss bottoms out at the entropy of q = 0.9 + 0.1/8 on the target, 0.1/8 elsewhere.
    floor = -(0.9125 * math.log(0.9125) + 7 * 0.0125 * math.log(0.0125))
    assert floor < history["loss"][-1]


def test_token_perplexity_is_exp_of_unsmoothed_loss():
    labels, logits = random_batch(seed=9)
    metric = TokenPerplexity()
    metric.update_state(labels[:2], logits[:2])
    metric.update_state(labels[2:], logits[2:])  # accumulates over batches, token-weighted
    unsmoothed = float(LabelSmoothedCrossEntropy(label_smoothing=0.0)(labels, logits))
    np.testing.assert_allclose(float(metric.result()), math.exp(unsmoothed), rtol=1e-5)
    metric.reset_state()
    assert float(metric.result()) == 1.0


def test_masked_accuracy_counts_real_tokens_only():
    labels = np.array([[1, 2, 0, 0], [3, 0, 0, 0]])
    logits = np.zeros((2, 4, 4), "float32")
    logits[0, 0, 1] = logits[0, 1, 3] = logits[1, 0, 3] = 1.0  # right, wrong, right; padding argmax 0
    metric = MaskedAccuracy()
    metric.update_state(labels, logits)
    np.testing.assert_allclose(float(metric.result()), 2 / 3, rtol=1e-6)
    # Against Keras' arg-max accuracy on random logits (no ties), each token weighted alike.
    rng = np.random.default_rng(0)
    logits, labels = rng.normal(size=(4, 25, 8)).astype("float32"), rng.integers(1, 8, (4, 25))
    metric.reset_state()
    metric.update_state(labels, logits)
    reference = keras.metrics.SparseCategoricalAccuracy()
    reference.update_state(labels.reshape(-1), logits.reshape(-1, 8))
    np.testing.assert_allclose(float(metric.result()), float(reference.result()), rtol=1e-6)


def test_config_round_trips():
    loss = LabelSmoothedCrossEntropy(label_smoothing=0.2, padding_id=3, name="smoothed")
    restored = keras.losses.deserialize(keras.losses.serialize(loss))
    assert restored.get_config() == loss.get_config()
    assert (restored.label_smoothing, restored.padding_id, restored.name) == (0.2, 3, "smoothed")
    for metric in (TokenPerplexity(padding_id=3), MaskedAccuracy(padding_id=3)):
        restored = keras.metrics.deserialize(keras.metrics.serialize(metric))
        assert type(restored) is type(metric) and restored.get_config() == metric.get_config()


def test_bad_input():
    with pytest.raises(ValueError, match=r"label_smoothing=1.0 must be in \[0, 1\)"):
        LabelSmoothedCrossEntropy(label_smoothing=1.0)
    logits = np.zeros((2, 3, 4), "float32")
    with pytest.raises(ValueError, match=r"integer targets of shape \(batch, target_length\)"):
        LabelSmoothedCrossEntropy()(np.eye(4)[np.ones((2, 3), "int32")], logits)  # one-hot
    with pytest.raises(ValueError, match=r"got targets \(2, 5\) and logits \(2, 3, 4\)"):
        LabelSmoothedCrossEntropy()(np.ones((2, 5), "int32"), logits)
    with pytest.raises(ValueError, match="TokenPerplexity expects"):
        TokenPerplexity().update_state(np.ones((2, 5), "int32"), logits)
