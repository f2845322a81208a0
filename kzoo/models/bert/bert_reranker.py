"""Reranking with BERT as a cross-encoder: a query and a document read together, one relevance
score each (BERT sec. 4.1, Figure 4a, with one output; Nogueira & Cho 2019, "Passage
Re-ranking with BERT", sec. 2), sentence-transformers' `CrossEncoder` checkpoints in and out."""

import keras
import numpy as np

from kzoo.models.bert.bert_backbone import bert_inputs
from kzoo.models.bert.bert_heads import dense_head, float32_logits, pooled_logits
from kzoo.models.bert.bert_optimizer import default_finetuning_optimizer
from kzoo.models.bert.bert_preprocessor import BertPreprocessor
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

    `fit((queries, documents), labels)` trains with binary cross-entropy on the logits,
    labels in [0, 1] (1: relevant); `compile()` with no arguments uses BERT's fine-tuning
    recipe (sec. 3.2, A.3).

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
        return keras.losses.BinaryCrossentropy(from_logits=True)

    def default_metrics(self):
        return [keras.metrics.BinaryAccuracy(name="accuracy", threshold=0.0)]  # on the logits

    def check_label_shape(self, shape):
        """Labels are one relevance per pair, `(batch,)` or `(batch, 1)`."""
        shape = tuple(shape)
        if not (len(shape) <= 1 or (len(shape) == 2 and shape[1] in (1, None))):
            raise ValueError(
                f"BertReranker labels are one relevance in [0, 1] per (query, document) pair, shape "
                f"(batch,); got shape {shape}."
            )

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
