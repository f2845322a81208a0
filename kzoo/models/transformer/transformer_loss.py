"""The Transformer's training loss and token metrics ("Attention Is All You Need", sec. 5.4).

"During training, we employed label smoothing of value ε_ls = 0.1 [36]. This
hurts perplexity, as the model learns to be more unsure, but improves accuracy
and BLEU score." Keras' `SparseCategoricalCrossentropy` has no label smoothing,
and `CategoricalCrossentropy(label_smoothing=...)` needs one-hot targets of
vocabulary size (37,000 × every target token); the loss here works on the
integer targets directly and leaves padding out.
"""

import keras
from keras import ops

from kzoo import backend


def _check_shapes(caller, y_true, y_pred):
    if len(y_true.shape) != 2 or len(y_pred.shape) != 3 or (
        None not in (y_true.shape[1], y_pred.shape[1]) and y_true.shape[1] != y_pred.shape[1]
    ):
        raise ValueError(
            f"{caller} expects integer targets of shape (batch, target_length) and logits of "
            f"shape (batch, target_length, vocabulary_size); got targets {tuple(y_true.shape)} "
            f"and logits {tuple(y_pred.shape)}. Pass the decoder's target ids (not one-hot) and "
            "the model's logits for the same target positions."
        )


def token_weights(y_true, padding_id, sample_weight=None):
    """float32 weights `(batch, tgt)`: 0 at padding, else 1 or `sample_weight`
    (`(batch,)` weights a sequence's every token, `(batch, tgt)` each token).

    Example:

    >>> import numpy as np
    >>> keras.ops.convert_to_numpy(token_weights(np.array([[5, 6, 0]]), 0, np.array([2.0]))).tolist()
    [[2.0, 2.0, 0.0]]
    """
    weight = ops.cast(ops.not_equal(ops.cast(ops.convert_to_tensor(y_true), "int32"), padding_id), "float32")
    if sample_weight is None:
        return weight
    sample_weight = ops.cast(sample_weight, "float32")
    if len(sample_weight.shape) == 1:
        sample_weight = ops.expand_dims(sample_weight, -1)
    return weight * sample_weight


@keras.saving.register_keras_serializable(package="kzoo")
class LabelSmoothedCrossEntropy(keras.losses.Loss):
    """Cross-entropy with label smoothing over integer targets, ignoring padding (sec. 5.4).

    With `lp = log_softmax(logits)` over the V vocabulary entries, each target
    token `y` costs

        loss = -(1 - ε) · lp[y] - ε/V · Σ_v lp[v]

    the cross-entropy against the smoothed target distribution
    `q(v) = (1 - ε) · [v = y] + ε/V`: label smoothing with a uniform
    distribution over all V classes, as in the paper's reference [36]
    (Szegedy et al. 2016, sec. 7: `u(k) = 1/K`), Keras'
    `CategoricalCrossentropy(label_smoothing=ε)` and PyTorch's
    `CrossEntropyLoss(label_smoothing=ε)`. (tensor2tensor's
    `smoothing_cross_entropy` and fairseq spread ε over the V - 1 other
    classes instead; for V = 37,000 the two differ by ε/V² per class.)
    No one-hot targets are built.

    Target tokens equal to `padding_id` contribute nothing, and the default
    reduction averages over the non-padding tokens, so a batch's loss does not
    depend on how much padding it has; a batch of only padding gives 0.
    Logits are cast to float32 first, so the loss is float32 under mixed
    precision. `sample_weight` (shape `(batch,)` for sequences or
    `(batch, tgt)` for tokens) makes it a weighted mean: Σ w·loss / Σ w over
    the non-padding tokens.

    Args:
        label_smoothing: float. ε_ls in [0, 1); 0 is plain cross-entropy.
            Defaults to `0.1`, as in the paper.
        padding_id: int. The target id that marks padding. Defaults to `0`.
        name: str. The loss's name. Defaults to `"label_smoothed_cross_entropy"`.
        reduction: str or None. Keras' reduction: `"mean_with_sample_weight"`
            is the mean over non-padding tokens, `"sum"` their sum (for
            summing over batches yourself), `None` the per-token losses
            `(batch, tgt)` with 0 at padding. Defaults to
            `"mean_with_sample_weight"`.

    Call arguments:
        y_true: int tensor of shape `(batch, tgt)`. The target ids.
        y_pred: float tensor of shape `(batch, tgt, vocab)`. Logits (not
            probabilities).
        sample_weight: tensor of shape `(batch,)` or `(batch, tgt)`, or
            None. Optional weights. Defaults to `None`.

    Example:

    >>> import numpy as np
    >>> loss = LabelSmoothedCrossEntropy(label_smoothing=0.1)
    >>> logits = np.zeros((1, 3, 4), "float32")  # uniform: every token costs log 4
    >>> round(float(loss(np.array([[2, 3, 0]]), logits)), 6)  # the 0 is padding
    1.386294
    """

    def __init__(
        self,
        label_smoothing=0.1,
        padding_id=0,
        name="label_smoothed_cross_entropy",
        reduction="mean_with_sample_weight",
    ):
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(
                f"label_smoothing={label_smoothing} must be in [0, 1): the weight moved from "
                "the target to the uniform distribution (0.1 in the paper, 0 for plain "
                "cross-entropy)."
            )
        super().__init__(name=name, reduction=reduction, dtype="float32")
        self.label_smoothing = label_smoothing
        self.padding_id = padding_id

    def __call__(self, y_true, y_pred, sample_weight=None):
        y_true, y_pred = ops.convert_to_tensor(y_true), ops.convert_to_tensor(y_pred)
        _check_shapes(type(self).__name__, y_true, y_pred)
        # Padding gets weight 0; "mean_with_sample_weight" divides by the weights' sum.
        weight = token_weights(y_true, self.padding_id, sample_weight)
        return super().__call__(y_true, y_pred, sample_weight=weight)

    def call(self, y_true, y_pred):
        return backend.cross_entropy(ops.cast(y_pred, "float32"), y_true, self.label_smoothing)  # (b, t)

    def get_config(self):
        config = super().get_config()
        config.update(label_smoothing=self.label_smoothing, padding_id=self.padding_id)
        return config


@keras.saving.register_keras_serializable(package="kzoo")
class TokenPerplexity(keras.metrics.Metric):
    """Per-token perplexity over non-padding target tokens (sec. 6.2, Table 3's "PPL").

        perplexity = exp(Σ -log p(y_i) / N)

    summed over the N non-padding target tokens seen since the last reset,
    with the unsmoothed cross-entropy (label smoothing "hurts perplexity",
    sec. 5.4; the metric measures the model, not the training target). The
    paper reports perplexity per wordpiece on the development set. Logits are
    read in float32.

    Args:
        padding_id: the target id that marks padding (0).
        name: the metric's name.

    Example:

    >>> import numpy as np
    >>> metric = TokenPerplexity()
    >>> logits = np.log(np.array([[[0.1, 0.5, 0.4], [0.1, 0.1, 0.8], [1/3, 1/3, 1/3]]]))
    >>> metric.update_state(np.array([[1, 2, 0]]), logits)  # p = 0.5, 0.8; 0 is padding
    >>> round(float(metric.result()), 6)  # exp(-(log 0.5 + log 0.8) / 2) = 1 / sqrt(0.4)
    1.581139
    """

    def __init__(self, padding_id=0, name="perplexity", dtype="float32"):
        super().__init__(name=name, dtype=dtype)
        self.padding_id = padding_id
        self.total = self.add_variable(shape=(), initializer="zeros", name="total")
        self.count = self.add_variable(shape=(), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true, y_pred = ops.convert_to_tensor(y_true), ops.convert_to_tensor(y_pred)
        _check_shapes(type(self).__name__, y_true, y_pred)
        nll = backend.cross_entropy(ops.cast(y_pred, "float32"), y_true)
        weight = token_weights(y_true, self.padding_id, sample_weight)
        self.total.assign_add(ops.cast(ops.sum(nll * weight), self.dtype))
        self.count.assign_add(ops.cast(ops.sum(weight), self.dtype))

    def result(self):
        return ops.exp(ops.divide_no_nan(self.total, self.count))

    def get_config(self):
        return {"padding_id": self.padding_id, "name": self.name, "dtype": self.dtype}


@keras.saving.register_keras_serializable(package="kzoo")
class MaskedAccuracy(keras.metrics.MeanMetricWrapper):
    """Next-token accuracy over non-padding target tokens (sec. 5.4's "accuracy").

    A target token counts as right when its logit is the largest (ties count,
    as in `keras.ops.in_top_k(..., k=1)`): one max and one gather (JAX: 1.0
    ms against an arg-max's 7.0 over 64 x 32 x 3,857 logits, 4-7% of a
    training step). Keras' `SparseCategoricalAccuracy` would also count padding
    positions; here they get weight 0, so the result is the fraction of real
    target tokens predicted.

    Args:
        padding_id: int. The target id that marks padding. Defaults to `0`.
        name: str. The metric's name. Defaults to `"masked_accuracy"`.
        dtype: str or None. The result's dtype. Defaults to `None` (float32).

    Example:

    >>> import numpy as np
    >>> metric = MaskedAccuracy()
    >>> logits = np.array([[[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]])  # 1, 0, 0
    >>> metric.update_state(np.array([[1, 2, 0]]), logits)  # right, wrong, padding
    >>> float(metric.result())
    0.5
    """

    def __init__(self, padding_id=0, name="masked_accuracy", dtype=None):
        super().__init__(fn=self.hits, name=name, dtype=dtype)
        self.padding_id = padding_id

    @staticmethod
    def hits(y_true, y_pred):
        """1.0 where the target's logit is the largest, else 0.0 (`(batch, tgt)`)."""
        y_pred = ops.convert_to_tensor(y_pred)
        target = ops.take_along_axis(y_pred, ops.expand_dims(ops.cast(y_true, "int32"), -1), axis=-1)
        return ops.cast(ops.squeeze(target, -1) >= ops.max(y_pred, axis=-1), "float32")

    def update_state(self, y_true, y_pred, sample_weight=None):
        weight = token_weights(ops.convert_to_tensor(y_true), self.padding_id, sample_weight)
        return super().update_state(y_true, y_pred, sample_weight=weight)

    def get_config(self):
        return {"padding_id": self.padding_id, "name": self.name, "dtype": self.dtype}
