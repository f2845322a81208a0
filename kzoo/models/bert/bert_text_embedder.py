"""Sentence embeddings from BERT: token states pooled into one vector per text
(Reimers & Gurevych, 2019, "Sentence-BERT", sec. 3), trained with in-batch
negatives (`kzoo.MultipleNegativesRankingLoss`), for semantic search."""

import keras
import numpy as np
from keras import ops

from kzoo.models.batching import LengthBatches
from kzoo.models.bert.bert_backbone import bert_inputs
from kzoo.models.bert.bert_optimizer import default_finetuning_optimizer
from kzoo.models.bert.bert_preprocessor import BertPreprocessor
from kzoo.models.embedding_quantization import check_precision, quantization_ranges, quantize_embeddings
from kzoo.models.embeddings import (
    MultipleNegativesRankingLoss,
    check_search_inputs,
    check_truncate_dim,
    cosine_similarity,
    prompted,
    resolve_prompt,
    semantic_search,
    truncate_embeddings,
)
from kzoo.models.task import Task

POOLING = ("mean", "cls", "max", "mean_sqrt_len_tokens")  # sentence-transformers' names


@keras.saving.register_keras_serializable(package="kzoo")
class SentencePooling(keras.layers.Layer):
    """One vector per text from its token states, over the real tokens only
    (Sentence-BERT sec. 3: MEAN, CLS and MAX), optionally of unit length.

    `"mean"` averages the states where `padding_mask` is 1, `"cls"` takes the
    `[CLS]` state, `"max"` the largest value of each feature over the real
    tokens, `"mean_sqrt_len_tokens"` the sum over sqrt(length); as
    sentence-transformers' `Pooling` module, in float32.

    Args:
        mode: str. One of `"mean"`, `"cls"`, `"max"`, `"mean_sqrt_len_tokens"`.
            Defaults to `"mean"`.
        normalize: bool. Divide by the L2 norm (sentence-transformers'
            `Normalize` module). Defaults to `True`.
        **kwargs: `keras.layers.Layer` arguments (`name`).

    Call arguments:
        states: float tensor `(batch, sequence, hidden)`.
        padding_mask: int or bool tensor `(batch, sequence)`, 1 at real tokens.

    Example:

    >>> import keras, numpy as np
    >>> states = np.array([[[1.0, 2.0], [3.0, 4.0], [9.0, 9.0]]], "float32")
    >>> pooled = SentencePooling("mean", normalize=False)(states, np.array([[1, 1, 0]]))
    >>> keras.ops.convert_to_numpy(pooled).tolist()
    [[2.0, 3.0]]
    """

    def __init__(self, mode="mean", normalize=True, **kwargs):
        kwargs.pop("dtype", None)  # float32 always, as sentence-transformers pools
        super().__init__(dtype="float32", **kwargs)
        if mode not in POOLING:
            raise ValueError(f"Unknown pooling {mode!r}: choose one of {list(POOLING)} (Sentence-BERT sec. 3).")
        self.mode, self.normalize = mode, bool(normalize)

    def call(self, states, padding_mask):
        states = ops.cast(states, "float32")
        mask = ops.expand_dims(ops.cast(padding_mask, "float32"), -1)
        if self.mode == "cls":
            pooled = states[:, 0]
        elif self.mode == "max":
            pooled = ops.max(ops.where(mask > 0, states, -1e30), axis=1)
        else:
            count = ops.maximum(ops.sum(mask, axis=1), 1e-9)
            pooled = ops.sum(states * mask, axis=1) / (count if self.mode == "mean" else ops.sqrt(count))
        if self.normalize:  # torch.nn.functional.normalize's epsilon
            pooled = pooled / ops.maximum(ops.sqrt(ops.sum(ops.square(pooled), axis=-1, keepdims=True)), 1e-12)
        return pooled

    def compute_output_shape(self, states_shape, padding_mask_shape=None):
        return (states_shape[0], states_shape[-1])

    def get_config(self):
        return {**super().get_config(), "mode": self.mode, "normalize": self.normalize}


@keras.saving.register_keras_serializable(package="kzoo")
class BertTextEmbedder(Task):
    """Sentence embeddings from BERT, for semantic search, clustering and
    deduplication (Sentence-BERT, Reimers & Gurevych 2019, sec. 3).

    The backbone's final token states are pooled over the real tokens (mean,
    `[CLS]` or max; `kzoo.models.bert.bert_text_embedder.SentencePooling`) and,
    with `normalize`, scaled to unit length, so the dot product of two
    embeddings is their cosine similarity. `from_preset` of a
    sentence-transformers checkpoint (`all_minilm_l6_v2`, or a directory with
    its `modules.json`) reads the pooling, the normalisation and the maximum
    length from the checkpoint's own files; `encode` then gives the vectors
    `sentence_transformers.SentenceTransformer(...).encode` gives.

    Embeddings can be shorter (`truncate_dim`, Matryoshka: Kusupati et al.
    2022, trained with `kzoo.MatryoshkaLoss`) and smaller (`precision`: int8 or
    binary codes, `kzoo.quantize_embeddings`); queries and documents can carry
    their own `prompts` (`encode_query`, `encode_document`, as
    sentence-transformers v5 and later), read from and written to the
    checkpoint's `config_sentence_transformers.json`.

    `fit((anchors, positives))` trains with in-batch negatives
    (`kzoo.MultipleNegativesRankingLoss`, scale 20), or with hard negatives
    as a third column; `compile()` with no arguments uses BERT's fine-tuning
    optimizer at sentence-transformers' learning rate of 2e-5.

    Args:
        backbone: `kzoo.BertBackbone`. The encoder, kept as `self.backbone`.
        pooling: str. `"mean"`, `"cls"`, `"max"` or `"mean_sqrt_len_tokens"`.
            Defaults to `"mean"`.
        normalize: bool. Unit-length embeddings. Defaults to `True`.
        preprocessor: `kzoo.BertPreprocessor`, `kzoo.BertTokenizer` or None.
            With one, `encode`, `fit` and `predict` take raw text. Defaults to `None`.
        prompts: dict or None. Prompt name -> text put before each text
            `encode` embeds (`{"query": "query: ", "document": "passage: "}`).
            Defaults to `None`: no prompts.
        default_prompt_name: str or None. The prompt `encode` uses when given
            none. Defaults to `None`.
        **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Call arguments:
        inputs: dict. `token_ids`, `segment_ids` and `padding_mask`, each
            `(batch, sequence_length)`.

    Returns:
        float32 embeddings `(batch, hidden_dim)`.

    Example:

    >>> from kzoo import BertBackbone, BertTokenizer
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat", "dog", "sat"]
    >>> backbone = BertBackbone(vocabulary_size=len(vocabulary), num_layers=1,
    ...     num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=16)
    >>> embedder = BertTextEmbedder(backbone, preprocessor=BertTokenizer(vocabulary))
    >>> vectors = embedder.encode(["a cat sat", "a dog sat", "a dog"])
    >>> vectors.shape, bool(abs((vectors ** 2).sum(axis=1) - 1).max() < 1e-5)
    ((3, 8), True)
    >>> scores, indices = embedder.search(["a cat"], vectors, top_k=2)
    >>> indices.shape
    (1, 2)
    >>> history = embedder.fit((["a cat", "a dog"], ["a cat sat", "a dog sat"]), epochs=1, verbose=0)
    """

    preprocessor_class = BertPreprocessor

    def __init__(self, backbone, pooling="mean", normalize=True, preprocessor=None, prompts=None,
                 default_prompt_name=None, **kwargs):
        prompts = dict(prompts or {})
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in prompts.items()):
            raise ValueError(f"prompts maps prompt names to texts, both str; got {prompts!r}.")
        if default_prompt_name is not None and default_prompt_name not in prompts:
            raise ValueError(f"default_prompt_name {default_prompt_name!r} is not one of the prompts {list(prompts)}.")
        # === Layers ===
        pool = SentencePooling(pooling, normalize, name="sentence_pooling")
        # === Functional model ===
        inputs = bert_inputs()
        states = backbone(inputs)["sequence_output"]  # (batch, seq, H)
        outputs = pool(states, inputs["padding_mask"])  # (batch, H)
        super().__init__(inputs, outputs, backbone=backbone, preprocessor=preprocessor, **kwargs)
        self.pooling = pooling
        self.normalize = normalize
        self.sentence_pooling = pool
        self.prompts, self.default_prompt_name = prompts, default_prompt_name

    # === The recipe ===

    def default_optimizer(self, total_steps=None):
        return default_finetuning_optimizer(self, total_steps, learning_rate=2e-5)  # sentence-transformers' rate

    def default_loss(self):
        return MultipleNegativesRankingLoss(scale=20.0)

    def compile(self, optimizer=None, loss="auto", metrics="auto", **kwargs):
        if hasattr(loss, "check_width"):  # kzoo.MatryoshkaLoss: its widths refused before any step
            loss.check_width(self.backbone.hidden_dim)
        super().compile(optimizer, loss, metrics, **kwargs)

    def unused_variables(self):
        """No embedding reads the `[CLS]` pooler (`kzoo.models.Task.unused_variables`)."""
        return self.backbone.pooled_dense.weights if hasattr(self, "backbone") else []

    # === Embeddings ===

    def encode(self, texts, batch_size=32, verbose="auto", callbacks=None, prompt_name=None, prompt=None,
               truncate_dim=None, precision="float32", ranges=None):
        """The embeddings of `texts`, in their order, as a NumPy array.

        Texts run in batches of similar lengths, each padded only as far as
        its longest text needs; a text longer than the preprocessor's
        `sequence_length` is truncated, as sentence-transformers truncates at
        its `max_seq_length`. The arguments after `callbacks` are
        sentence-transformers' `encode`'s: a prompt put before each text, the
        first `truncate_dim` dimensions kept (then scaled back to unit length
        when the embedder normalises; Kusupati et al. 2022), and codes of a
        smaller `precision` (`kzoo.quantize_embeddings`).

        Args:
            texts: list of str (or a NumPy array / `tf.string` tensor). The texts.
            batch_size: int. Texts per batch. Defaults to `32`.
            verbose: str or int. As for `keras.Model.predict`. Defaults to `"auto"`.
            callbacks: list of `keras.callbacks.Callback` or None. As for
                `keras.Model.predict` (e.g. `kzoo.progress.predict_progress()`'s).
                Defaults to `None`.
            prompt_name: str or None. A key of `prompts`. Defaults to `None`:
                `default_prompt_name`'s prompt, if any.
            prompt: str or None. A prompt text; wins over `prompt_name`. Defaults to `None`.
            truncate_dim: int or None. Dimensions kept, at most `hidden_dim`.
                Defaults to `None`: all.
            precision: str. `"float32"`, `"int8"`, `"uint8"`, `"binary"` or
                `"ubinary"`. Defaults to `"float32"`.
            ranges: float array `(2, dim)` or None. int8 / uint8 ranges
                (`kzoo.quantization_ranges` of a calibration set). Defaults to
                `None`: those of these embeddings.

        Returns:
            NumPy array `(len(texts), dim)`: float32, or the codes of `precision`.

        Example:

        >>> from kzoo import BertTextEmbedder
        >>> embedder = BertTextEmbedder.from_preset("bert_tiny", load_weights=False)
        >>> embedder.encode({"token_ids": [[2, 7, 3]]}, verbose=0).shape
        (1, 128)
        >>> embedder.encode({"token_ids": [[2, 7, 3]]}, verbose=0, truncate_dim=64, precision="binary").shape
        (1, 8)
        """
        if isinstance(texts, tuple):
            raise ValueError(
                "encode embeds one text per row: pass a list of strings. A tuple (anchors, positives) "
                "is what `fit` trains on."
            )
        check_truncate_dim(truncate_dim, self.backbone.hidden_dim)
        check_precision(precision)
        texts = prompted(texts, resolve_prompt(self.prompts, self.default_prompt_name, prompt_name, prompt))
        if precision.endswith("int8") and ranges is None and isinstance(texts, list) and len(texts) < 2:
            raise ValueError(f"{precision} codes of fewer than 2 texts need ranges: pass "
                             "ranges=kzoo.quantization_ranges(calibration_embeddings).")
        extra = {} if callbacks is None else {"callbacks": callbacks}  # none: predict's one-batch fast path
        embeddings = self.predict(texts, batch_size=batch_size, verbose=verbose, **extra)
        embeddings = truncate_embeddings(keras.ops.convert_to_numpy(embeddings), truncate_dim, self.normalize)
        return quantize_embeddings(embeddings, precision, ranges)

    def encode_query(self, texts, prompt_name=None, prompt=None, **kwargs):
        """`encode` with the prompt named `"query"` when `prompts` has one and
        none is given (sentence-transformers v5's `encode_query`); other
        arguments as `encode`'s.

        Example:

        >>> from kzoo import BertBackbone, BertTextEmbedder, BertTokenizer
        >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "query", ":", "a", "cat"]
        >>> backbone = BertBackbone(vocabulary_size=len(vocabulary), num_layers=1, num_heads=2,
        ...     hidden_dim=8, intermediate_dim=16)
        >>> embedder = BertTextEmbedder(backbone, preprocessor=BertTokenizer(vocabulary),
        ...     prompts={"query": "query: "})
        >>> bool(abs(embedder.encode_query(["a cat"], verbose=0)
        ...          - embedder.encode(["query: a cat"], verbose=0)).max() < 1e-6)
        True
        """
        if prompt_name is None and prompt is None and "query" in self.prompts:
            prompt_name = "query"
        return self.encode(texts, prompt_name=prompt_name, prompt=prompt, **kwargs)

    def encode_document(self, texts, prompt_name=None, prompt=None, **kwargs):
        """`encode` with the first of the prompts named `"document"`, `"passage"`
        and `"corpus"` that `prompts` has, when none is given
        (sentence-transformers v5's `encode_document`); other arguments as `encode`'s.

        Example:

        >>> from kzoo import BertTextEmbedder
        >>> embedder = BertTextEmbedder.from_preset("bert_tiny", load_weights=False)
        >>> embedder.encode_document({"token_ids": [[2, 7, 3]]}, verbose=0).shape  # no prompts: encode's
        (1, 128)
        """
        if prompt_name is None and prompt is None:
            prompt_name = next((name for name in ("document", "passage", "corpus") if name in self.prompts), None)
        return self.encode(texts, prompt_name=prompt_name, prompt=prompt, **kwargs)

    def similarity(self, texts_a, texts_b, batch_size=32):
        """The cosine similarity of every text of `texts_a` with every text of `texts_b`.

        Args:
            texts_a: list of str, or embeddings `(n, dim)`.
            texts_b: list of str, or embeddings `(m, dim)`.
            batch_size: int. Texts per batch. Defaults to `32`.

        Returns:
            float32 NumPy array `(n, m)`.

        Example:

        >>> from kzoo import BertTextEmbedder
        >>> embedder = BertTextEmbedder.from_preset("bert_tiny", load_weights=False)
        >>> embedder.similarity({"token_ids": [[2, 7, 3]]}, {"token_ids": [[2, 7, 3], [2, 9, 3]]}).shape
        (1, 2)
        """
        return cosine_similarity(*(self._embedded(texts, batch_size, self.encode) for texts in (texts_a, texts_b)))

    def search(self, queries, corpus, top_k=10, batch_size=32, truncate_dim=None, precision="float32", ranges=None,
               rescore=True):
        """Exact top-k semantic search: the `top_k` texts of `corpus` most
        similar to each query, best first (`kzoo.semantic_search`); texts
        embedded with `encode_query` and `encode_document`.

        Encode a large corpus once (`encode_document`) and pass its embeddings:
        the search then scores it in chunks, with memory bounded by the chunks.
        With `precision`, the corpus is searched as codes (a corpus of texts
        or floats is quantized, with its own ranges unless `ranges` are given)
        and the candidates rescored with the float queries.

        Args:
            queries: list of str, or query embeddings `(q, dim)`.
            corpus: list of str, corpus embeddings `(n, dim)` (from
                `encode_document`), or its codes of `precision`.
            top_k: int. Results per query. Defaults to `10`.
            batch_size: int. Texts per batch when encoding. Defaults to `32`.
            truncate_dim: int or None. Dimensions kept (`encode`'s). Defaults to `None`.
            precision: str. As `kzoo.semantic_search`'s. Defaults to `"float32"`.
            ranges: float array `(2, dim)` or None. The int8 / uint8 ranges.
                Defaults to `None`: the corpus' own.
            rescore: bool. As `kzoo.semantic_search`'s. Defaults to `True`.

        Returns:
            `(scores, indices)`: NumPy arrays `(q, min(top_k, n))`; `indices`
            are rows of `corpus`.

        Example:

        >>> import numpy as np
        >>> from kzoo import BertTextEmbedder
        >>> embedder = BertTextEmbedder.from_preset("bert_tiny", load_weights=False)
        >>> corpus = embedder.encode({"token_ids": [[2, 7, 3], [2, 9, 3]]}, verbose=0)
        >>> embedder.search({"token_ids": [[2, 9, 3]]}, corpus, top_k=1)[1].tolist()
        [[1]]
        >>> embedder.search({"token_ids": [[2, 9, 3]]}, corpus, top_k=1, truncate_dim=64, precision="int8")[1].tolist()
        [[1]]
        """
        check_precision(precision)
        check_search_inputs(queries, corpus)
        coded = isinstance(corpus, np.ndarray) and corpus.dtype in (np.int8, np.uint8)
        if coded and truncate_dim is not None:
            raise ValueError("Codes cannot be truncated: quantize the truncated embeddings "
                             "(encode_document(..., truncate_dim=d, precision=...)).")
        queries = self._embedded(queries, batch_size, self.encode_query, truncate_dim)
        if not coded:
            corpus = self._embedded(corpus, batch_size, self.encode_document, truncate_dim)
            if precision.endswith("int8") and ranges is None:
                ranges = quantization_ranges(corpus)
            corpus = quantize_embeddings(corpus, precision, ranges)
        return semantic_search(queries, corpus, top_k, precision=precision, ranges=ranges, rescore=rescore)

    def _embedded(self, texts, batch_size, encode, truncate_dim=None):
        if isinstance(texts, np.ndarray) and texts.dtype.kind == "f":  # embeddings (2-D, else refused)
            return truncate_embeddings(texts, truncate_dim, self.normalize)
        return encode(texts, batch_size=batch_size, verbose=0, truncate_dim=truncate_dim)

    # === Data: (anchors, positives[, negatives]) for the contrastive loss ===

    def predict(self, x, batch_size=None, verbose="auto", **kwargs):
        if isinstance(x, tuple):
            raise ValueError(
                "BertTextEmbedder.predict embeds one text per row: pass a list of strings. A tuple "
                "(anchors, positives[, negatives]) is what `fit` and `evaluate` take."
            )
        return super().predict(x, batch_size=batch_size, verbose=verbose, **kwargs)

    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None,
            validation_split=0.0, validation_data=None, shuffle=None, **kwargs):
        # `validation_data=(anchors, positives)` are examples, not Keras' (x, y): the embedder takes no labels.
        if isinstance(validation_data, tuple) and not isinstance(validation_data[0], (tuple, dict)):
            validation_data = (validation_data,)
        return super().fit(x, y, batch_size, epochs, verbose, callbacks, validation_split, validation_data,
                           shuffle, **kwargs)

    def _prepare(self, x, y=None, sample_weight=None, batch_size=None, order="by_length", seed=0, refused=None):
        owner = type(self).__name__
        if y is not None and not isinstance(x, tuple):
            raise ValueError(
                f"{owner} takes no labels: it trains on (anchors, positives[, negatives]), a tuple of "
                "lists of texts, each anchor's positive being its target. Pass fit((anchors, positives))."
            )
        if isinstance(x, tuple) and (y is not None or len(x) not in (2, 3)):
            raise ValueError(
                f"{owner} trains on (anchors, positives) or (anchors, positives, negatives): a tuple of "
                "2 or 3 lists of texts, row i of each belonging together, and no labels (each "
                f"anchor's positive is its target). Got a tuple of {len(x)} and y={type(y).__name__}."
            )
        return super()._prepare(x, y, sample_weight, batch_size, order, seed, refused)

    def _packed(self, x, y, sample_weight):
        # The task's one way in, each text of a tuple packed alone: (examples, k, length).
        if not isinstance(x, tuple):
            return super()._packed(x, y, sample_weight)
        packed = [super(BertTextEmbedder, self)._packed(column, None, None)[0] for column in x]
        return {key: np.stack([p[key] for p in packed], axis=1) for key in packed[0]}, y, sample_weight

    def _length_batches(self, x, *arguments, **options):
        tuples = x["token_ids"].ndim == 3
        return (_TextTuples if tuples else LengthBatches)(x, *arguments, **options)


class _TextTuples(LengthBatches):
    """Batches of B (anchor, positive[, negative]) examples as the loss takes
    them: each example's k texts in consecutive rows, `(B · k, length)`, and
    one label per example (`kzoo.MultipleNegativesRankingLoss` reads only
    their number)."""

    def batch(self, rows):
        x = super().batch(rows)[0]
        x = {key: value.reshape(-1, value.shape[-1]) for key, value in x.items()}
        labels = np.zeros(len(rows), dtype="int32")
        weights = self.arrays[2]
        return (x, labels) if weights is None else (x, labels, weights[rows])
