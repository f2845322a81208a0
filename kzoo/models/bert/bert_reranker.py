"""Reranking with BERT as a cross-encoder: a query and a document read together, one relevance
score each (BERT sec. 4.1, Figure 4a, with one output; Nogueira & Cho 2019, "Passage
Re-ranking with BERT", sec. 2), sentence-transformers' `CrossEncoder` checkpoints in and out."""

import numbers

import keras
import numpy as np
import tensorflow as tf

from kzoo.models.batching import LengthBatches
from kzoo.models.bert.bert_backbone import bert_inputs
from kzoo.models.bert.bert_heads import dense_head, float32_logits, pooled_logits
from kzoo.models.bert.bert_optimizer import default_finetuning_optimizer
from kzoo.models.bert.bert_preprocessor import BertPreprocessor
from kzoo.models.reranking_losses import RerankingAccuracy, RerankingLoss
from kzoo.models.task import Task

# The score's activation: kzoo's name -> NumPy (sentence-transformers' torch.nn.Sigmoid, Identity, Tanh).
ACTIVATIONS = {
    "sigmoid": lambda logits: 1.0 / (1.0 + np.exp(-logits)),
    "linear": lambda logits: logits,
    "tanh": np.tanh,
}


@keras.saving.register_keras_serializable(package="kzoo")
class BertReranker(Task):
    """A cross-encoder: BERT reads a (query, document) pair as one sequence and scores how
    relevant the document is (BERT sec. 4.1, Figure 4a, the sentence-pair classifier with one
    output; Nogueira & Cho 2019, sec. 2). Slower than an embedder, which encodes each text
    alone, and more accurate: rerank an embedder's top results with it.

    The pair is packed `[CLS] query [SEP] document [SEP]` (longest-first truncation, as
    Hugging Face's); the head is `kzoo.BertClassifier`'s, W on the pooled `[CLS]` output C
    with one output, so the network gives one logit per pair. `predict_scores` and `rank`
    apply `activation` to it, as sentence-transformers' `CrossEncoder.predict` does (sigmoid
    by default); `from_preset` of a `CrossEncoder` directory (a Hugging Face
    `BertForSequenceClassification` with one label) reads the activation it records, and
    `save_to_preset(path, format="huggingface")` writes a directory `CrossEncoder(path)` loads.

    `fit` trains in either of sentence-transformers' ways (`kzoo.RerankingLoss`): on labelled
    pairs, `fit((queries, documents), labels)` with labels in [0, 1] (1: relevant), binary
    cross-entropy on the logits; or on lists, `fit((queries, positives, negatives))` with no
    labels, `negatives` holding the same number of texts for each query (a list of lists, or a
    list of str for one each), a softmax cross-entropy over each query's candidates whose
    target is its positive (sentence-transformers' `MultipleNegativesRankingLoss` for a
    `CrossEncoder`, on the negatives given). `compile()` with no arguments uses BERT's
    fine-tuning recipe (sec. 3.2, A.3) and `kzoo.RerankingLoss()`, which tells the two apart.

    Args:
        backbone: `kzoo.BertBackbone`. The encoder, kept as `self.backbone`.
        preprocessor: `kzoo.BertPreprocessor`, `kzoo.BertTokenizer` or None. With one,
            `fit`, `predict_scores` and `rank` take raw text. Defaults to `None`.
        dropout: float. The dropout rate on C before W. Defaults to `0.1`.
        activation: str. The score's function of the logit: `"sigmoid"`, `"linear"` (the
            logit itself) or `"tanh"`. Defaults to `"sigmoid"`.
        **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Call arguments:
        inputs: dict. `token_ids`, `segment_ids` and `padding_mask`, each
            `(batch, sequence_length)`.

    Returns:
        Logits `(batch, 1)`.

    Example:

    >>> from kzoo import BertBackbone, BertTokenizer
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat", "dog", "sat", "where"]
    >>> backbone = BertBackbone(vocabulary_size=len(vocabulary), num_layers=1,
    ...     num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=16)
    >>> reranker = BertReranker(backbone, preprocessor=BertTokenizer(vocabulary))
    >>> scores = reranker.predict_scores((["where a cat", "where a cat"], ["a cat sat", "a dog"]))
    >>> scores.shape, bool(((0 < scores) & (scores < 1)).all())
    ((2,), True)
    >>> scores, indices = reranker.rank("where a cat", ["a dog", "a cat sat", "a dog sat"], top_k=2)
    >>> indices.shape
    (2,)
    >>> history = reranker.fit((["a cat", "a cat"], ["a cat sat", "a dog"]), [1.0, 0.0], verbose=0)
    >>> history = reranker.fit((["a cat", "a dog"], ["a cat sat", "a dog sat"], [["a dog", "where"], ["a cat",
    ...     "sat"]]), verbose=0)  # each query's positive against its two negatives
    """

    preprocessor_class = BertPreprocessor
    default_optimizer = default_finetuning_optimizer

    def __init__(self, backbone, preprocessor=None, dropout=0.1, activation="sigmoid", **kwargs):
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"BertReranker: activation must be one of {list(ACTIVATIONS)} (sentence-transformers' "
                f"torch.nn.Sigmoid, Identity, Tanh); got {activation!r}."
            )
        # === Layers === (BertClassifier's names: its checkpoints' head loads as this one)
        head_dropout, head = dense_head(backbone, 1, dropout, "classifier_dropout", "logits")
        # === Functional model ===
        inputs = bert_inputs()
        pooled = backbone(inputs)["pooled_output"]  # (batch, H)
        outputs = float32_logits(head(head_dropout(pooled)))  # (batch, 1)
        super().__init__(inputs, outputs, backbone=backbone, preprocessor=preprocessor, **kwargs)
        self.dropout = dropout
        self.activation = activation
        self.num_classes = 1  # one label, as Hugging Face's config records it
        self.classifier_dropout = head_dropout
        self.logits = head

    def call(self, inputs, training=None, mask=None):
        # As `BertClassifier.call`: the head reads only [CLS], so the last layer runs at that row.
        return pooled_logits(self.backbone, self.complete_inputs(inputs), self.classifier_dropout, self.logits,
                             training)

    # === The recipe ===

    def default_loss(self):
        return RerankingLoss()  # binary cross-entropy on pairs, the softmax over lists

    def default_metrics(self):
        return [RerankingAccuracy(name="accuracy")]  # a pair's logit's sign; a list's positive first

    def check_label_shape(self, shape):
        """Labels are one relevance per pair, `(batch,)` or `(batch, 1)`."""
        shape = tuple(shape)
        if not (len(shape) <= 1 or (len(shape) == 2 and shape[1] in (1, None))):
            raise ValueError(
                f"BertReranker labels are one relevance in [0, 1] per (query, document) pair, shape "
                f"(batch,); got shape {shape}."
            )

    def _label_ids(self, labels, packed):
        # Rank 1, (pairs,): `kzoo.RerankingLoss` reads rank 2 as lists when TensorFlow traces (None, None).
        labels = super()._label_ids(labels, packed)
        return labels if labels is None or isinstance(labels, dict) else tf.reshape(labels, [-1])

    def _check_labels(self, labels, packed):
        values = np.asarray(labels)
        if values.size and (values.dtype.kind not in "iuf" or values.min() < 0 or values.max() > 1):
            raise ValueError(
                "BertReranker labels are relevances in [0, 1] (1: the document answers the query, 0: it "
                f"does not), for binary cross-entropy; got values such as {values.ravel()[:3].tolist()}."
            )

    # === Scores ===

    def predict_scores(self, x, batch_size=None, verbose=0):
        """One relevance score per pair: `activation` of the logit, what
        `sentence_transformers.CrossEncoder(...).predict(pairs)` returns.

        Args:
            x: tuple `(queries, documents)` of two equally long lists of str, or packed inputs (a dict).
            batch_size: int or None. Pairs per batch. Defaults to `None` (32).
            verbose: str or int. As for `keras.Model.predict`. Defaults to `0`.

        Returns:
            float32 NumPy array `(pairs,)`.

        Example:

        >>> from kzoo import BertReranker
        >>> reranker = BertReranker.from_preset("bert_tiny", load_weights=False, activation="linear")
        >>> logits = reranker.predict({"token_ids": [[2, 7, 3, 9, 3]]}, verbose=0)
        >>> bool(reranker.predict_scores({"token_ids": [[2, 7, 3, 9, 3]]})[0] == logits[0, 0])
        True
        """
        if isinstance(x, (list, np.ndarray)) or (isinstance(x, tuple) and len(x) != 2):
            raise ValueError(
                "BertReranker scores (query, document) pairs: pass a tuple of two lists, (queries, "
                "documents), row i of each a pair."
            )
        logits = keras.ops.convert_to_numpy(self.predict(x, batch_size=batch_size, verbose=verbose))
        return ACTIVATIONS[self.activation](np.asarray(logits, "float32")[:, 0]).astype("float32")

    def rank(self, query, documents, top_k=None, batch_size=32):
        """The documents most relevant to `query`, best first (equal scores in document order):
        a second stage after an embedder's search (`kzoo.BertTextEmbedder.search`).

        Args:
            query: str. The query.
            documents: list of str. The candidates.
            top_k: int or None. How many to return, at most `len(documents)`. Defaults to `None`: all.
            batch_size: int. Pairs per batch. Defaults to `32`.

        Returns:
            `(scores, indices)`: NumPy arrays `(top_k,)`, float32 scores (as `predict_scores`)
            and int64 indices into `documents`.

        Example:

        >>> from kzoo import BertBackbone, BertReranker, BertTokenizer
        >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "one", "two", "three"]
        >>> reranker = BertReranker(BertBackbone(vocabulary_size=len(vocabulary), num_layers=1, num_heads=2,
        ...     hidden_dim=8, intermediate_dim=16), preprocessor=BertTokenizer(vocabulary))
        >>> scores, indices = reranker.rank("one", ["one", "two", "three"], top_k=2)
        >>> len(scores), bool(scores[0] >= scores[1])
        (2, True)
        """
        if not isinstance(query, str):
            raise ValueError(f"BertReranker.rank takes one query, a str; got {type(query).__name__}.")
        documents = list(documents) if isinstance(documents, (list, tuple, np.ndarray)) else documents
        if not isinstance(documents, list) or not documents:
            raise ValueError("BertReranker.rank needs a non-empty list of documents to rank.")
        top_k = len(documents) if top_k is None else top_k
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= len(documents):
            raise ValueError(
                f"top_k must be an int in [1, {len(documents)}] (the number of documents); got {top_k!r}."
            )
        scores = self.predict_scores(([query] * len(documents), documents), batch_size=batch_size)
        order = np.argsort(-scores, kind="stable")[:top_k].astype("int64")
        return scores[order], order

    def rerank(self, queries, documents, candidates, top_k=None, batch_size=32, candidate_scores=None, weight=None):
        """Each query's candidate documents reordered by score, best first (equal scores in
        candidate order): the second stage of retrieve-then-rerank, `candidates` being a first
        stage's results, e.g. the `indices` of `kzoo.BertTextEmbedder.search`.

        Args:
            queries: list of str. The queries.
            documents: list of str. The corpus the candidates index.
            candidates: int array `(queries, c)`. Each query's candidates, rows of `documents`.
            top_k: int or None. Results kept per query, at most c. Defaults to `None`: all c.
            batch_size: int. Pairs per batch. Defaults to `32`.
            candidate_scores: float array `(queries, c)` or None. The first stage's score of each
                candidate (the `scores` of `kzoo.BertTextEmbedder.search`), interpolated with the
                reranker's: give `weight` too. Defaults to `None`.
            weight: float in [0, 1] or None. The reranker's share of the interpolated score
                `weight * z(logits) + (1 - weight) * z(candidate_scores)`, z standardising each
                query's row to mean 0 and standard deviation 1: a convex combination of
                normalised scores (Bruch, Gai & Ingber 2023, "An Analysis of Fusion Functions for
                Hybrid Retrieval"), which lets a reranker that ranks below its embedder alone still
                lift it as a second signal. Choose it on validation queries. Defaults to `None`:
                the reranker's order alone.

        Returns:
            `(scores, indices)`: NumPy arrays `(queries, top_k)`, float32 scores (as
            `predict_scores`; the interpolated ones when `weight` is given) and int64 rows of
            `documents`.

        Example:

        >>> from kzoo import BertBackbone, BertReranker, BertTokenizer
        >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "one", "two", "three"]
        >>> reranker = BertReranker(BertBackbone(vocabulary_size=len(vocabulary), num_layers=1, num_heads=2,
        ...     hidden_dim=8, intermediate_dim=16), preprocessor=BertTokenizer(vocabulary))
        >>> scores, indices = reranker.rerank(["one", "two"], ["one", "two", "three"], [[2, 0], [1, 2]], top_k=1)
        >>> indices.shape, set(indices[1].tolist()) <= {1, 2}
        ((2, 1), True)
        >>> scores, indices = reranker.rerank(["one"], ["one", "two", "three"], [[2, 0]], candidate_scores=[[0.9, 0.1]],
        ...                                   weight=0.0)  # the first stage's order: z-scores 1 and -1
        >>> indices.tolist(), scores.tolist()
        ([[2, 0]], [[1.0, -1.0]])
        """
        candidates = np.asarray(candidates)
        for name, texts in (("queries", queries), ("documents", documents)):
            if not isinstance(texts, (list, tuple)) or not texts or not all(isinstance(text, str) for text in texts):
                raise ValueError(f"BertReranker.rerank takes {name} as a list of str, not empty; got "
                                 f"{'an empty list' if isinstance(texts, (list, tuple)) else type(texts).__name__}.")
        if candidates.ndim != 2 or candidates.dtype.kind not in "iu" or len(candidates) != len(queries) or (
                candidates.size == 0):
            raise ValueError(
                f"candidates must be an int array (queries, c) with c >= 1, a row of document indices per query; "
                f"got {candidates.dtype} of shape {candidates.shape} for {len(queries)} queries."
            )
        if candidates.min() < 0 or candidates.max() >= len(documents):
            raise ValueError(
                f"candidates index documents 0 to {len(documents) - 1}; got indices from {candidates.min()} to "
                f"{candidates.max()}."
            )
        top_k = candidates.shape[1] if top_k is None else top_k
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= candidates.shape[1]:
            raise ValueError(
                f"top_k must be an int in [1, {candidates.shape[1]}] (the candidates per query); got {top_k!r}."
            )
        if weight is not None or candidate_scores is not None:
            candidate_scores = _interpolation_scores(candidate_scores, weight, candidates.shape)
        pairs = ([query for query in queries for _ in range(candidates.shape[1])],
                 [documents[j] for j in candidates.ravel()])
        if weight is None:
            scores = self.predict_scores(pairs, batch_size=batch_size).reshape(candidates.shape)
        else:  # logits, not their sigmoid: it would flatten the margins between confident scores
            logits = keras.ops.convert_to_numpy(self.predict(pairs, batch_size=batch_size, verbose=0))
            logits = np.asarray(logits, "float64")[:, 0].reshape(candidates.shape)
            scores = (weight * _standardised(logits) + (1 - weight) * _standardised(candidate_scores)).astype("float32")
        order = np.argsort(-scores, axis=1, kind="stable")[:, :top_k]
        return np.take_along_axis(scores, order, axis=1), np.take_along_axis(candidates, order, axis=1).astype("int64")

    # === Data: (queries, documents) with labels, or (queries, positives, negatives) lists ===

    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None,
            validation_split=0.0, validation_data=None, shuffle=None, **kwargs):
        # `validation_data=(queries, positives, negatives)` are lists, not Keras' (x, y, sample_weight).
        if isinstance(validation_data, tuple) and len(validation_data) == 3 and _is_column(validation_data[0]):
            validation_data = (validation_data,)
        return super().fit(x, y, batch_size, epochs, verbose, callbacks, validation_split, validation_data,
                           shuffle, **kwargs)

    def predict(self, x, batch_size=None, verbose="auto", **kwargs):
        if isinstance(x, tuple) and len(x) != 2:
            raise ValueError(
                "BertReranker.predict scores (query, document) pairs: pass (queries, documents). A tuple "
                "(queries, positives, negatives) is what `fit` and `evaluate` train and measure on."
            )
        return super().predict(x, batch_size=batch_size, verbose=verbose, **kwargs)

    def _prepare(self, x, y=None, sample_weight=None, batch_size=None, order="by_length", seed=0, refused=None):
        if isinstance(x, tuple) and (len(x) not in (2, 3) or (len(x) == 3 and y is not None)):
            raise ValueError(
                "BertReranker trains on ((queries, documents), labels), a relevance in [0, 1] per pair, or on "
                "(queries, positives, negatives) with no labels (each query's positive is its target), "
                f"negatives a list of lists of texts; got a tuple of {len(x)} and y={type(y).__name__}."
            )
        return super()._prepare(x, y, sample_weight, batch_size, order, seed, refused)

    def _packed(self, x, y, sample_weight):
        # A list: each query packed with each of its m candidates, (examples, m, length).
        if not (isinstance(x, tuple) and len(x) == 3):
            return super()._packed(x, y, sample_weight)
        queries, candidates = x[0], _candidates(*x)  # (B,), (B, m)
        m = int(candidates.shape[1])
        packed = super()._packed((tf.repeat(queries, m), tf.reshape(candidates, [-1])), None, None)[0]
        return {key: value.reshape(-1, m, value.shape[-1]) for key, value in packed.items()}, None, sample_weight

    def _length_batches(self, x, *arguments, **options):
        return (_CandidateLists if x["token_ids"].ndim == 3 else LengthBatches)(x, *arguments, **options)


def _interpolation_scores(candidate_scores, weight, shape):
    """`rerank`'s `candidate_scores` as float64, checked with `weight`; a `ValueError` in kzoo's words else."""
    if candidate_scores is None or weight is None:
        raise ValueError(
            "BertReranker.rerank interpolates with the first stage when given both candidate_scores (its score of "
            "each candidate) and weight (the reranker's share, in [0, 1]): pass both, or neither for the "
            "reranker's order alone."
        )
    if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not 0 <= weight <= 1:
        raise ValueError(f"weight is the reranker's share of the interpolated score, a number in [0, 1]; got "
                         f"{weight!r}.")
    scores = np.asarray(candidate_scores)
    if scores.shape != shape or scores.dtype.kind not in "fiu" or not np.isfinite(scores).all():
        raise ValueError(
            f"candidate_scores must be finite numbers shaped as candidates, {shape}: the first stage's score of each "
            f"candidate; got {scores.dtype} of shape {scores.shape}."
        )
    return scores.astype("float64")


def _standardised(scores):
    """Each row at mean 0 and standard deviation 1 (a row of equal scores: 0)."""
    centred = scores - scores.mean(axis=1, keepdims=True)
    return centred / np.maximum(centred.std(axis=1, keepdims=True), 1e-12)


def _is_column(value):
    return isinstance(value, (list, np.ndarray, tf.Tensor)) and not isinstance(value, dict)


def _candidates(queries, positives, negatives):
    """`(B, m)` strings: each query's positive, then its m - 1 negatives; a `ValueError` in kzoo's words else."""
    if any(column.dtype != tf.string for column in (queries, positives, negatives)):
        raise ValueError("BertReranker lists are texts: queries, positives and negatives must hold strings.")
    if isinstance(negatives, tf.RaggedTensor):
        counts = negatives.row_lengths().numpy()
        raise ValueError(
            f"BertReranker: every query needs the same number of negatives (its softmax runs over 1 + that many "
            f"candidates); got from {counts.min()} to {counts.max()}. Keep the first {counts.min()} of each, or "
            "drop the queries with fewer."
        )
    if queries.shape.rank != 1 or positives.shape.rank != 1 or negatives.shape.rank not in (1, 2):
        raise ValueError(
            "BertReranker lists are (queries, positives, negatives): a text per query in the first two, and "
            f"a list of negative texts per query (or one text) in the third; got shapes {queries.shape}, "
            f"{positives.shape} and {negatives.shape}."
        )
    negatives = negatives[:, None] if negatives.shape.rank == 1 else negatives
    if negatives.shape[1] == 0:
        raise ValueError("BertReranker: each query needs at least one negative to rank its positive against.")
    return tf.concat([positives[:, None], negatives], axis=1)


class _CandidateLists(LengthBatches):
    """Batches of B lists as `kzoo.RerankingLoss` takes them: each query's m (query,
    candidate) pairs in consecutive rows, `(B · m, length)`, and labels `(B, m)` (their
    shape says lists of m; the positive is each list's first)."""

    def batch(self, rows):
        x = super().batch(rows)[0]
        m = x["token_ids"].shape[1]
        x = {key: value.reshape(-1, value.shape[-1]) for key, value in x.items()}
        labels = np.zeros((len(rows), m), "float32")
        labels[:, 0] = 1.0  # the positive; `RerankingLoss` reads the shape only
        weights = self.arrays[2]
        return (x, labels) if weights is None else (x, labels, weights[rows])
