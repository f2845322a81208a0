"""Sentence embeddings: their training objective (in-batch negatives), cosine
similarity and exact top-k search, for any model that maps a text to a vector
(`kzoo.BertTextEmbedder`).

The objective is Henderson et al. (2017, "Efficient Natural Language Response
Suggestion for Smart Reply", sec. 4.4) as sentence-transformers trains its
released models with it (`MultipleNegativesRankingLoss`, scale 20): for a
batch of (anchor, positive) pairs, every other positive of the batch is a
negative.
"""

import keras
import numpy as np
from keras import ops


@keras.saving.register_keras_serializable(package="kzoo")
class MultipleNegativesRankingLoss(keras.losses.Loss):
    """The contrastive loss with in-batch negatives (Henderson et al., 2017, sec. 4.4).

    For B anchors a_i and their positives p_i (and optionally B hard
    negatives n_i), the scores s_ij = scale · cos(a_i, c_j) against every
    candidate c of the batch (all positives, then all hard negatives) go
    through a softmax cross-entropy whose target is p_i: the other B - 1
    positives (and the hard negatives) are the negatives, at no extra cost.
    sentence-transformers' `MultipleNegativesRankingLoss` with its defaults
    (cosine similarity, scale 20) is the same loss.

    `y_pred` stacks the embeddings `(k · B, dim)`: the B anchors first, then
    the B positives, then (k = 3) the B hard negatives, which is how
    `kzoo.BertTextEmbedder.fit` batches `(anchors, positives[, negatives])`;
    `y_true` is `(B,)`, the index of each anchor's positive (`arange(B)`).

    Args:
        scale: float. The inverse temperature of the softmax. Defaults to `20.0`.
        name: str. The loss's name. Defaults to `"multiple_negatives_ranking"`.
        **kwargs: `keras.losses.Loss` arguments (`reduction`, `dtype`).

    Example:

    >>> import numpy as np
    >>> anchors = np.eye(3, 4, dtype="float32")
    >>> loss = MultipleNegativesRankingLoss()
    >>> right = float(loss(np.arange(3), np.concatenate([anchors, anchors])))
    >>> wrong = float(loss(np.arange(3), np.concatenate([anchors, anchors[::-1]])))
    >>> right < 1e-6 < 1.0 < wrong
    True
    """

    def __init__(self, scale=20.0, name="multiple_negatives_ranking", **kwargs):
        super().__init__(name=name, **kwargs)
        self.scale = float(scale)

    def call(self, y_true, y_pred):
        batch = ops.shape(y_true)[0]
        anchors, candidates = y_pred[:batch], y_pred[batch:]
        scores = self.scale * ops.matmul(_unit(anchors), ops.transpose(_unit(candidates)))
        return keras.losses.sparse_categorical_crossentropy(y_true, scores, from_logits=True)

    def get_config(self):
        return {**super().get_config(), "scale": self.scale}


def _unit(vectors, epsilon=1e-12):
    # torch.nn.functional.normalize's epsilon, as sentence-transformers' cosine similarity.
    norms = ops.sqrt(ops.sum(ops.square(vectors), axis=-1, keepdims=True))
    return vectors / ops.maximum(norms, epsilon)


def cosine_similarity(a, b):
    """The cosine similarity of every row of `a` with every row of `b`.

    Args:
        a: array `(n, dim)`. Embeddings.
        b: array `(m, dim)`. Embeddings.

    Returns:
        float32 NumPy array `(n, m)`.

    Example:

    >>> cosine_similarity([[1.0, 0.0], [1.0, 1.0]], [[2.0, 0.0]]).astype("float64").round(4).tolist()
    [[1.0], [0.7071]]
    """
    a, b = (_unit_numpy(np.asarray(v, "float32")) for v in (a, b))
    return a @ b.T


def _unit_numpy(vectors):
    if vectors.ndim != 2:
        raise ValueError(f"Embeddings are a 2-D array (texts, dim); got shape {vectors.shape}.")
    return vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)


def semantic_search(queries, corpus, top_k=10, query_chunk=256, corpus_chunk=16384):
    """Exact top-k search by cosine similarity: for each query embedding, the
    `top_k` most similar corpus embeddings, best first.

    Scores are computed `query_chunk` × `corpus_chunk` at a time and only the
    best `top_k` of each query are kept between chunks, so memory is bounded
    by the chunks, not by queries × corpus.

    Args:
        queries: array `(q, dim)`. Query embeddings.
        corpus: array `(n, dim)`. Corpus embeddings.
        top_k: int. Results per query (at most `n`). Defaults to `10`.
        query_chunk: int. Queries scored at once. Defaults to `256`.
        corpus_chunk: int. Corpus rows scored at once. Defaults to `16384`.

    Returns:
        `(scores, indices)`: float32 and int64 NumPy arrays `(q, min(top_k, n))`,
        each row by decreasing score.

    Example:

    >>> corpus = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    >>> scores, indices = semantic_search([[1.0, 0.1]], corpus, top_k=2, corpus_chunk=2)
    >>> indices.tolist(), scores.astype("float64").round(3).tolist()
    ([[0, 2]], [[0.995, 0.774]])
    """
    queries, corpus = (_unit_numpy(np.asarray(v, "float32")) for v in (queries, corpus))
    if queries.shape[1] != corpus.shape[1]:
        raise ValueError(
            f"Queries and corpus must be embedded by the same model: their dimensions differ "
            f"({queries.shape[1]} and {corpus.shape[1]})."
        )
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be a positive int; got {top_k!r}.")
    k = min(top_k, len(corpus))
    scores = np.empty((len(queries), k), "float32")
    indices = np.empty((len(queries), k), "int64")
    for q in range(0, len(queries), query_chunk):
        block = queries[q: q + query_chunk]
        best_scores = np.full((len(block), 0), -np.inf, "float32")
        best_indices = np.zeros((len(block), 0), "int64")
        for c in range(0, len(corpus), corpus_chunk):
            chunk_scores = block @ corpus[c: c + corpus_chunk].T
            chunk_indices = np.broadcast_to(np.arange(c, c + chunk_scores.shape[1]), chunk_scores.shape)
            best_scores = np.concatenate([best_scores, chunk_scores], axis=1)
            best_indices = np.concatenate([best_indices, chunk_indices], axis=1)
            if best_scores.shape[1] > k:  # keep the k best (argpartition: no full sort)
                keep = np.argpartition(-best_scores, k - 1, axis=1)[:, :k]
                best_scores = np.take_along_axis(best_scores, keep, axis=1)
                best_indices = np.take_along_axis(best_indices, keep, axis=1)
        order = np.lexsort((best_indices, -best_scores), axis=1)
        scores[q: q + len(block)] = np.take_along_axis(best_scores, order, axis=1)
        indices[q: q + len(block)] = np.take_along_axis(best_indices, order, axis=1)
    return scores, indices
