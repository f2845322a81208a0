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

from kzoo.models.embedding_quantization import check_codes, check_precision, code_scores, quantize_embeddings, rescored


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

    `y_pred` holds each example's k texts in consecutive rows, `(B · k, dim)`:
    anchor, positive (and hard negative) of example 0, then of example 1, ...,
    which is how `kzoo.BertTextEmbedder.fit` batches `(anchors, positives[,
    negatives])`; a data-parallel split of the batch then keeps every example
    whole, and each replica's examples are each other's negatives (as
    sentence-transformers without gathering across devices). `y_true` has
    one entry per example, `(B,)`; its values are not read: each anchor's
    target is its own positive.

    Args:
        scale: float. The inverse temperature of the softmax. Defaults to `20.0`.
        name: str. The loss's name. Defaults to `"multiple_negatives_ranking"`.
        **kwargs: `keras.losses.Loss` arguments (`reduction`, `dtype`).

    Example:

    >>> import numpy as np
    >>> anchors = np.eye(3, 4, dtype="float32")
    >>> loss = MultipleNegativesRankingLoss()
    >>> right = float(loss(np.zeros(3), np.stack([anchors, anchors], axis=1).reshape(6, 4)))
    >>> wrong = float(loss(np.zeros(3), np.stack([anchors, anchors[::-1]], axis=1).reshape(6, 4)))
    >>> right < 1e-6 < 1.0 < wrong
    True
    """

    def __init__(self, scale=20.0, name="multiple_negatives_ranking", **kwargs):
        super().__init__(name=name, **kwargs)
        self.scale = float(scale)

    def call(self, y_true, y_pred):
        batch = ops.shape(y_true)[0]
        texts = ops.reshape(y_pred, (batch, -1, ops.shape(y_pred)[-1]))  # (B, k, dim)
        anchors = texts[:, 0]
        candidates = ops.reshape(ops.transpose(texts[:, 1:], (1, 0, 2)), (-1, ops.shape(y_pred)[-1]))
        scores = self.scale * ops.matmul(_unit(anchors), ops.transpose(_unit(candidates)))  # (B, (k-1)·B)
        targets = ops.arange(batch)  # anchor i's positive is candidate i
        return keras.losses.sparse_categorical_crossentropy(targets, scores, from_logits=True)

    def get_config(self):
        return {**super().get_config(), "scale": self.scale}


@keras.saving.register_keras_serializable(package="kzoo")
class MatryoshkaLoss(keras.losses.Loss):
    """A loss applied to the first dimensions of the embeddings at several widths
    and summed, so that truncated embeddings work too (Matryoshka Representation
    Learning, Kusupati et al., 2022, sec. 3).

    For each width d of `matryoshka_dims`, the embeddings' first d dimensions,
    scaled to unit length, go through `loss`; the result is the sum of those
    losses times `matryoshka_weights`. sentence-transformers' `MatryoshkaLoss`
    (every width at every step) is the same loss. Train with it, then
    `encode(texts, truncate_dim=d)` gives d-dimensional embeddings that keep
    most of the full width's quality.

    Args:
        loss: `keras.losses.Loss`. The loss at each width, called on `(y_true,
            y_pred[..., :d])`; its own reduction is not used (this loss reduces
            the weighted sum). Typically `kzoo.MultipleNegativesRankingLoss()`.
        matryoshka_dims: sequence of int. The widths, each at most the
            embeddings' (include the full width, as sentence-transformers advises).
        matryoshka_weights: sequence of float or None. One weight per width.
            Defaults to `None`: 1 each.
        name: str. The loss's name. Defaults to `"matryoshka"`.
        **kwargs: `keras.losses.Loss` arguments (`reduction`, `dtype`).

    Example:

    >>> import numpy as np
    >>> inner = MultipleNegativesRankingLoss()
    >>> loss = MatryoshkaLoss(inner, matryoshka_dims=[4, 2], matryoshka_weights=[1.0, 0.5])
    >>> texts = np.random.default_rng(0).normal(size=(6, 4)).astype("float32")  # 3 (anchor, positive) pairs
    >>> expected = float(inner(np.zeros(3), texts)) + 0.5 * float(inner(np.zeros(3), texts[:, :2]))
    >>> bool(abs(float(loss(np.zeros(3), texts)) - expected) < 1e-5)
    True
    """

    def __init__(self, loss, matryoshka_dims, matryoshka_weights=None, name="matryoshka", **kwargs):
        super().__init__(name=name, **kwargs)
        dims = list(matryoshka_dims) if isinstance(matryoshka_dims, (list, tuple)) else None
        if not dims or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in dims):
            raise ValueError(f"matryoshka_dims must be a non-empty list of positive ints (embedding widths); "
                             f"got {matryoshka_dims!r}.")
        weights = [1.0] * len(dims) if matryoshka_weights is None else [float(w) for w in matryoshka_weights]
        if len(weights) != len(dims):
            raise ValueError(f"matryoshka_weights needs one weight per width: {len(dims)} widths {dims}, "
                             f"{len(weights)} weights.")
        if not isinstance(loss, keras.losses.Loss):
            raise ValueError(f"loss must be a keras.losses.Loss (e.g. kzoo.MultipleNegativesRankingLoss()); "
                             f"got {loss!r}.")
        self.loss = loss
        self.matryoshka_dims, self.matryoshka_weights = dims, weights

    def check_width(self, width):
        """Refuses widths above the embeddings' `width`, before any training step."""
        too_wide = [d for d in self.matryoshka_dims if d > width]
        if too_wide:
            raise ValueError(f"matryoshka_dims {too_wide} exceed the embeddings' width of {width}: "
                             f"each must be at most {width}.")

    def call(self, y_true, y_pred):
        self.check_width(y_pred.shape[-1])
        total = 0.0
        for dim, weight in zip(self.matryoshka_dims, self.matryoshka_weights):
            total = total + weight * self.loss.call(y_true, _unit(y_pred[..., :dim]))
        return total

    def get_config(self):
        return {**super().get_config(), "loss": keras.saving.serialize_keras_object(self.loss),
                "matryoshka_dims": self.matryoshka_dims, "matryoshka_weights": self.matryoshka_weights}

    @classmethod
    def from_config(cls, config):
        return cls(**{**config, "loss": keras.saving.deserialize_keras_object(config["loss"])})


def truncate_embeddings(embeddings, truncate_dim, normalize=True):
    """The first `truncate_dim` dimensions of each embedding, scaled back to unit length
    with `normalize` (Kusupati et al., 2022; sentence-transformers' `truncate_dim`).

    Args:
        embeddings: float array `(n, dim)`.
        truncate_dim: int or None. The width kept, at most `dim`; None keeps all.
        normalize: bool. Unit length after truncating. Defaults to `True`.

    Returns:
        float32 NumPy array `(n, truncate_dim)`.

    Example:

    >>> truncate_embeddings([[0.6, 0.0, 0.8]], 2).tolist()
    [[1.0, 0.0]]
    """
    embeddings = np.asarray(embeddings, "float32")
    if embeddings.ndim != 2:
        raise ValueError(f"Embeddings are a 2-D array (texts, dim); got shape {embeddings.shape}.")
    if truncate_dim is None:
        return embeddings
    check_truncate_dim(truncate_dim, embeddings.shape[-1])
    kept = embeddings[:, :truncate_dim]
    return _unit_numpy(kept) if normalize else kept


def check_truncate_dim(truncate_dim, width):
    """Refuses a `truncate_dim` that is not a positive int at most `width`."""
    whole = isinstance(truncate_dim, (int, np.integer)) and not isinstance(truncate_dim, bool)
    if truncate_dim is not None and not (whole and 0 < truncate_dim <= width):
        raise ValueError(f"truncate_dim must be a positive int at most the embeddings' width of {width}; "
                         f"got {truncate_dim!r}.")


def check_search_inputs(queries, corpus):
    """Refuses empty queries or an empty corpus (texts, embeddings or packed ids) before any is embedded.

    Example:

    >>> check_search_inputs(["a cat"], [])
    Traceback (most recent call last):
    ...
    ValueError: search: the corpus is empty: there is nothing to search. Pass at least one text or embedding.
    """
    for name, texts in (("queries", queries), ("the corpus", corpus)):
        if isinstance(texts, dict):  # packed ids: one row per text
            texts = next(iter(texts.values()), [])
        size = len(texts) if isinstance(texts, (list, tuple)) else tuple(getattr(texts, "shape", (None,)))[0]
        if size == 0:
            raise ValueError(f"search: {name} {'are' if name == 'queries' else 'is'} empty: there is nothing to "
                             f"search{' for' if name == 'queries' else ''}. Pass at least one text or embedding.")


def resolve_prompt(prompts, default_prompt_name, prompt_name=None, prompt=None):
    """The prompt text to put before each text, as sentence-transformers resolves it: `prompt`,
    else the one named `prompt_name`, else the default's, else none (`""`).

    Example:

    >>> resolve_prompt({"query": "query: "}, None, prompt_name="query")
    'query: '
    """
    if prompt is not None:
        return prompt
    if prompt_name is not None and prompt_name not in prompts:
        raise ValueError(f"No prompt named {prompt_name!r}: this embedder's prompts are {list(prompts)}.")
    return prompts.get(prompt_name if prompt_name is not None else default_prompt_name, "")


def prompted(texts, prompt):
    """`texts` with `prompt` before each (a non-string is left for the input checks to name).

    Example:

    >>> prompted(["a cat"], "query: ")
    ['query: a cat']
    """
    if not prompt:
        return texts
    if not isinstance(texts, (list, np.ndarray)):
        raise ValueError(f"A prompt ({prompt!r}) goes before raw texts: pass a list of strings, or "
                         "prompt='' to embed these inputs as they are.")
    return [prompt + text if isinstance(text, str) else text for text in np.asarray(texts, object).tolist()]


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

    >>> cosine_similarity([[1.0, 0.0], [1.0, 1.0]], [[2.0, 0.0]]).astype(float).round(4).tolist()
    [[1.0], [0.7071]]
    """
    a, b = (_unit_numpy(np.asarray(v, "float32")) for v in (a, b))
    return a @ b.T


def _unit_numpy(vectors):
    if vectors.ndim != 2:
        raise ValueError(f"Embeddings are a 2-D array (texts, dim); got shape {vectors.shape}.")
    return vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)


def semantic_search(queries, corpus, top_k=10, query_chunk=256, corpus_chunk=16384, precision="float32",
                    ranges=None, rescore=True, rescore_multiplier=2):
    """Exact top-k search by cosine similarity: for each query embedding, the
    `top_k` most similar corpus embeddings, best first; or over a quantized corpus.

    Scores are computed `query_chunk` × `corpus_chunk` at a time and only the
    best `top_k` of each query are kept between chunks, so memory is bounded
    by the chunks, not by queries × corpus.

    With `precision` other than `"float32"`, `corpus` holds the codes of
    `kzoo.quantize_embeddings` (Shakir, Aarsen & Lee, 2024): float queries are
    quantized alike (int8 / uint8 with the corpus' `ranges`) and ranked by the
    dot product of the codes (int8 / uint8) or the Hamming distance (binary,
    scores are minus the distance); then, with `rescore`, the best
    `top_k * rescore_multiplier` are rescored with the float query against the
    dequantized codes, as sentence-transformers' `semantic_search_usearch`
    and `semantic_search_faiss` do. Queries given as codes are not rescored.

    Args:
        queries: array `(q, dim)`. Query embeddings (or codes of `precision`).
        corpus: array `(n, dim)`. Corpus embeddings, or codes of `precision`.
        top_k: int. Results per query; a corpus of fewer rows gives all of
            them (as sentence-transformers' `semantic_search`). Defaults to `10`.
        query_chunk: int. Queries scored at once. Defaults to `256`.
        corpus_chunk: int. Corpus rows scored at once. Defaults to `16384`.
        precision: str. `"float32"`, `"int8"`, `"uint8"`, `"binary"` or
            `"ubinary"`: what `corpus` holds. Defaults to `"float32"`.
        ranges: float array `(2, dim)` or None. The int8 / uint8 corpus' ranges
            (`kzoo.quantization_ranges`), to quantize float queries and to rescore.
            Defaults to `None`.
        rescore: bool. Rescore the candidates with the float queries. Defaults to `True`.
        rescore_multiplier: int. Candidates rescored per result. Defaults to `2`.

    Returns:
        `(scores, indices)`: float32 and int64 NumPy arrays `(q, min(top_k, n))`,
        each row by decreasing score (equal scores by ascending index).

    Example:

    >>> corpus = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    >>> scores, indices = semantic_search([[1.0, 0.1]], corpus, top_k=2, corpus_chunk=2)
    >>> indices.tolist(), scores.astype(float).round(3).tolist()
    ([[0, 2]], [[0.995, 0.774]])
    >>> import kzoo
    >>> codes = kzoo.quantize_embeddings(corpus, "ubinary")
    >>> semantic_search([[1.0, 0.1]], codes, top_k=2, precision="ubinary")[1].tolist()
    [[2, 0]]
    """
    check_precision(precision)
    for name, value in (("top_k", top_k), ("query_chunk", query_chunk), ("corpus_chunk", corpus_chunk),
                        ("rescore_multiplier", rescore_multiplier)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive int; got {value!r}.")
    queries, corpus = _numbers(queries, "queries"), _numbers(corpus, "corpus")
    if corpus.ndim == 2 and len(corpus) == 0:
        raise ValueError(f"The corpus is empty (shape {corpus.shape}): there is nothing to search. "
                         "Pass at least one corpus embedding.")
    if precision != "float32":
        return _quantized_search(queries, corpus, top_k, query_chunk, corpus_chunk, precision, ranges, rescore,
                                 rescore_multiplier)
    queries, corpus = (_unit_numpy(np.asarray(v, "float32")) for v in (queries, corpus))
    if queries.shape[1] != corpus.shape[1]:
        raise ValueError(
            f"Queries and corpus must be embedded by the same model: their dimensions differ "
            f"({queries.shape[1]} and {corpus.shape[1]})."
        )
    scores, indices = _top_k(queries, corpus, top_k, lambda q, c: q @ c.T, query_chunk, corpus_chunk)
    return scores.astype("float32"), indices


def _numbers(array, name):
    """`array` as a NumPy array, refused in kzoo's words when it holds no numbers (texts, say)."""
    array = np.asarray(array)
    if array.dtype.kind not in "fiu":
        raise ValueError(f"semantic_search takes embeddings, arrays of numbers; {name} is a {array.dtype} array of "
                         f"shape {array.shape}. To search texts, use BertTextEmbedder.search(queries, corpus).")
    return array


def _quantized_search(queries, corpus, top_k, query_chunk, corpus_chunk, precision, ranges, rescore, multiplier):
    queries = np.asarray(queries)
    float_queries = queries.dtype.kind == "f"
    if queries.ndim != 2:
        raise ValueError(f"Queries are a 2-D array (queries, dim); got shape {queries.shape}.")
    corpus = check_codes(corpus, precision, queries.shape[1] if float_queries else None)
    if float_queries and precision.endswith("int8") and ranges is None:
        raise ValueError(
            f"Searching a {precision} corpus with float queries needs the corpus' ranges: pass "
            "ranges=kzoo.quantization_ranges(calibration) as the corpus was quantized with."
        )
    codes = quantize_embeddings(queries, precision, ranges) if float_queries else check_codes(queries, precision)
    if codes.shape[1] != corpus.shape[1]:
        raise ValueError(f"Query codes have {codes.shape[1]} columns and the corpus {corpus.shape[1]}: "
                         "quantize both from embeddings of the same model.")
    rescoring = bool(rescore) and float_queries
    candidates = top_k * multiplier if rescoring else top_k
    scores, indices = _top_k(codes, corpus, candidates, lambda q, c: code_scores(q, c, precision), query_chunk,
                             corpus_chunk, whole_scores=True)
    if rescoring:
        scores, indices = rescored(queries, corpus, indices, precision, ranges, top_k)
    return scores.astype("float32"), indices


def _top_k(queries, corpus, top_k, score, query_chunk, corpus_chunk, whole_scores=False):
    """The best `top_k` corpus rows of each query by `score(query block, corpus block)`, equal
    scores by ascending row. `whole_scores` (codes' scores are whole numbers, often equal): the
    selection between chunks breaks ties by row too, exactly (score · (n + 1) - row, in float64)."""
    k = min(top_k, len(corpus))
    scores = np.empty((len(queries), k), "float64")
    indices = np.empty((len(queries), k), "int64")
    for q in range(0, len(queries), query_chunk):
        block = queries[q: q + query_chunk]
        best_scores = np.full((len(block), 0), -np.inf)
        best_indices = np.zeros((len(block), 0), "int64")
        for c in range(0, len(corpus), corpus_chunk):
            chunk_scores = score(block, corpus[c: c + corpus_chunk])
            chunk_indices = np.broadcast_to(np.arange(c, c + chunk_scores.shape[1]), chunk_scores.shape)
            best_scores = np.concatenate([best_scores, chunk_scores], axis=1)
            best_indices = np.concatenate([best_indices, chunk_indices], axis=1)
            if best_scores.shape[1] > k:  # keep the k best (argpartition: no full sort)
                key = best_scores * (len(corpus) + 1) - best_indices if whole_scores else best_scores
                keep = np.argpartition(-key, k - 1, axis=1)[:, :k]
                best_scores = np.take_along_axis(best_scores, keep, axis=1)
                best_indices = np.take_along_axis(best_indices, keep, axis=1)
        order = np.lexsort((best_indices, -best_scores), axis=1)
        scores[q: q + len(block)] = np.take_along_axis(best_scores, order, axis=1)
        indices[q: q + len(block)] = np.take_along_axis(best_indices, order, axis=1)
    return scores, indices
