"""A cross-encoder's training objective and accuracy, for both ways a reranker trains
(`kzoo.BertReranker.fit`): (query, document) pairs with a relevance label each, or
(query, positive, negatives) lists with none.

- Pairs: binary cross-entropy on each pair's logit (sentence-transformers v4+
  `cross_encoder.losses.BinaryCrossEntropyLoss`; Nogueira & Cho 2019, "Passage Re-ranking
  with BERT", sec. 2).
- Lists: a softmax cross-entropy over each query's m candidates whose target is the
  positive, its first: sentence-transformers v4+ `cross_encoder.losses.MultipleNegativesRankingLoss`
  (`calculate_loss`: `CrossEntropyLoss(scale * activation_fn(logits), 0)`, defaults
  `scale=10.0`, `activation_fn=Sigmoid()`) on the hard negatives given, without its
  `num_negatives` extra candidates drawn from other queries of the batch (which would need
  pairs the batch does not hold). It is the listwise softmax loss of Cao et al. 2007,
  "Learning to Rank: From Pairwise Approach to Listwise Approach" (ListNet, its top-one
  probability) with all the target probability on the positive.

Which one applies is read from the labels' static shape, so that one `compile()` serves
both: `(B,)` or `(B, 1)` relevances are pairs; `(B, m)`, lists (`is_lists`).
"""

import keras
from keras import ops

# The score's activation before the listwise softmax (sentence-transformers' Sigmoid, Identity, Tanh).
ACTIVATIONS = {"sigmoid": ops.sigmoid, "linear": lambda logits: logits, "tanh": ops.tanh}


def is_lists(y_true):
    """Whether labels are lists' `(B, m)` rather than pairs' relevances `(B,)` or `(B, 1)`: from
    the rank and the static last dimension (rank 2 with an unknown one, as TensorFlow traces a
    batch, is lists: `kzoo.BertReranker` gives pairs' labels rank 1).

    Example:

    >>> import numpy as np
    >>> is_lists(np.zeros((2, 4))), is_lists(np.zeros((2,))), is_lists(np.zeros((2, 1)))
    (True, False, False)
    """
    shape = tuple(y_true.shape)
    return len(shape) == 2 and shape[-1] != 1


def _lists(logits, y_true):
    # (B · m,) logits as (B, m): B from the labels, m from the logits (either may be unknown when traced).
    return ops.reshape(logits, (ops.shape(y_true)[0], -1))


@keras.saving.register_keras_serializable(package="kzoo")
class RerankingLoss(keras.losses.Loss):
    """A cross-encoder's loss: binary cross-entropy on labelled pairs, a softmax cross-entropy
    over each query's candidates for lists (sentence-transformers v4+ `CrossEncoder` losses
    `BinaryCrossEntropyLoss` and `MultipleNegativesRankingLoss`; Cao et al. 2007).

    `y_pred` holds one logit per (query, document) pair, `(pairs, 1)`. For pairs, `y_true` is
    their relevances in [0, 1], `(B,)` or `(B, 1)`, and each pair's loss is
    `-[y log σ(z) + (1 - y) log(1 - σ(z))]`. For lists, `y_pred` holds each query's m
    candidates in consecutive rows (positive, then its negatives), `(B · m, 1)`, and `y_true`
    is `(B, m)`, of which only the shape is read; each query's loss is
    `-log softmax(scale · activation(z_1..z_m))_1`, the positive's. This is how
    `kzoo.BertReranker.fit` batches each kind.

    Args:
        scale: float. The lists' softmax inverse temperature. Defaults to `10.0`
            (sentence-transformers').
        activation: str. The lists' function of each logit before scaling: `"sigmoid"`,
            `"linear"` (the logit itself: a plain softmax over the logits) or `"tanh"`.
            Defaults to `"sigmoid"` (sentence-transformers').
        name: str. The loss's name. Defaults to `"reranking"`.
        **kwargs: `keras.losses.Loss` arguments (`reduction`, `dtype`).

    Example:

    >>> import numpy as np
    >>> loss = RerankingLoss(scale=1.0, activation="linear")
    >>> logits = np.array([[2.0], [0.0], [0.0]], "float32")  # one query: positive, two negatives
    >>> round(float(loss(np.zeros((1, 3)), logits)), 4)  # -log(e^2 / (e^2 + 2))
    0.2395
    >>> round(float(loss(np.array([1.0, 0.0, 0.0]), logits)), 4)  # three labelled pairs
    0.5044
    """

    def __init__(self, scale=10.0, activation="sigmoid", name="reranking", **kwargs):
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0:
            raise ValueError(f"RerankingLoss: scale must be a positive number (10.0 by default); got {scale!r}.")
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"RerankingLoss: activation must be one of {list(ACTIVATIONS)} (sentence-transformers' Sigmoid, "
                f"Identity, Tanh); got {activation!r}."
            )
        super().__init__(name=name, **kwargs)
        self.scale = float(scale)
        self.activation = activation

    def call(self, y_true, y_pred):
        logits = ops.reshape(y_pred, (-1,))  # one per pair
        if not is_lists(y_true):  # pairs: (B,)
            return ops.binary_crossentropy(ops.reshape(y_true, (-1,)), logits, from_logits=True)
        scores = self.scale * ACTIVATIONS[self.activation](_lists(logits, y_true))  # (B, m)
        return -ops.log_softmax(scores, axis=-1)[:, 0]  # the positive, first: (B,)

    def get_config(self):
        return {**super().get_config(), "scale": self.scale, "activation": self.activation}


def reranking_accuracy(y_true, y_pred):
    """Per pair, whether the logit's sign is the label (`keras.metrics.BinaryAccuracy` at 0 on
    logits); per list, whether the positive (first) scores above every negative. Shapes as
    `RerankingLoss`.

    Example:

    >>> import numpy as np
    >>> from keras.ops import convert_to_numpy
    >>> logits = np.array([[2.0], [0.5], [-1.0], [3.0]], "float32")
    >>> convert_to_numpy(reranking_accuracy(np.zeros((2, 2)), logits)).tolist()  # two lists of two
    [1.0, 0.0]
    >>> convert_to_numpy(reranking_accuracy(np.array([1.0, 1.0, 0.0, 0.0]), logits)).tolist()
    [1.0, 1.0, 1.0, 0.0]
    """
    logits = ops.reshape(ops.convert_to_tensor(y_pred), (-1,))
    if not is_lists(y_true):
        labels = ops.reshape(ops.convert_to_tensor(y_true), (-1,))
        return ops.cast(ops.equal(labels, ops.cast(logits > 0, labels.dtype)), "float32")
    scores = _lists(logits, y_true)
    return ops.cast(scores[:, 0] > ops.max(scores[:, 1:], axis=-1), "float32")  # a tie is not a success


@keras.saving.register_keras_serializable(package="kzoo")
class RerankingAccuracy(keras.metrics.MeanMetricWrapper):
    """The mean of `reranking_accuracy`: pairs whose logit's sign is their label, or lists whose
    positive scores highest.

    Args:
        name: str. The metric's name. Defaults to `"accuracy"`.
        dtype: str or None. The metric's dtype. Defaults to `None`.

    Example:

    >>> import numpy as np
    >>> metric = RerankingAccuracy()
    >>> metric.update_state(np.zeros((2, 2)), np.array([[2.0], [0.5], [-1.0], [3.0]], "float32"))
    >>> float(metric.result())
    0.5
    """

    def __init__(self, name="accuracy", dtype=None):
        super().__init__(fn=reranking_accuracy, name=name, dtype=dtype)

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype}
