"""Token classification with BERT: named entity recognition (BERT sec. 5.3, Table 3)."""

import keras
import numpy as np
from keras import ops

from kzoo.models import input_checks
from kzoo.models.bert.bert_backbone import bert_inputs
from kzoo.models.bert.bert_bio_tags import entity_f1
from kzoo.models.bert.bert_heads import dense_head, float32_logits
from kzoo.models.bert.bert_optimizer import default_finetuning_optimizer
from kzoo.models.bert.bert_token_classifier_preprocessor import (
    IGNORED_LABEL,
    OUTSIDE_TAG,
    BertTokenClassifierPreprocessor,
)
from kzoo.models.task import Task


def _over_tokens(sample_weight, labels):
    """Sentence weights `(batch,)` given to each token, `(batch, seq)` like
    `labels`: Keras' losses and metrics do not broadcast them over the tokens."""
    if sample_weight is None or len(sample_weight.shape) != 1:
        return sample_weight
    # A new tensor, not a broadcast view: Keras' torch loss multiplies it in place.
    return ops.expand_dims(sample_weight, -1) * ops.ones_like(labels, dtype=sample_weight.dtype)


def _check_num_classes(num_classes):
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
        raise ValueError(
            f"num_classes must be an int >= 2 (the number of labels K, 9 for CoNLL-2003's "
            f"BIO tags); got {num_classes!r}."
        )


@keras.saving.register_keras_serializable(package="kzoo")
class TokenAccuracy(keras.metrics.SparseCategoricalAccuracy):
    """Accuracy over the labelled tokens: positions labelled -1 ([CLS],
    [SEP], padding, later sub-tokens of a word) are left out, as the loss
    leaves them out (BERT sec. 5.3: one prediction per word, at its first
    sub-token).

    Keras' `SparseCategoricalAccuracy` would count them as wrong; here they
    get weight 0. A `sample_weight` of shape `(batch,)` weights sentences.

    Example:

    >>> import numpy as np
    >>> metric = TokenAccuracy()
    >>> logits = np.array([[[0.0, 1.0], [1.0, 0.0], [1.0, 0.0]]])  # predicts 1, 0, 0
    >>> metric.update_state(np.array([[1, 1, -1]]), logits)
    >>> float(metric.result())
    0.5
    """

    def __init__(self, name="token_accuracy", dtype=None):
        super().__init__(name=name, dtype=dtype)

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.convert_to_tensor(y_true)
        weight = ops.cast(ops.not_equal(y_true, IGNORED_LABEL), self.dtype)  # (batch, seq)
        if sample_weight is not None:
            weight = weight * _over_tokens(ops.convert_to_tensor(sample_weight, self.dtype), y_true)
        return super().update_state(y_true, y_pred, sample_weight=weight)


@keras.saving.register_keras_serializable(package="kzoo")
class BertTokenClassifier(Task):
    """BERT with a classification layer on every token: softmax(T_i W), read at
    each word's first sub-token (BERT sec. 5.3).

    For CoNLL-2003 NER, "we use the representation of the first sub-token as
    the input to the token-level classifier over the NER label set" (sec. 5.3);
    no CRF. T_i is the backbone's final hidden state at token i, with dropout
    0.1 before W ∈ R^{K×H}. Training labels are one per word; the attached
    `BertTokenClassifierPreprocessor` puts each at its word's first sub-token
    and -1 everywhere else, and the loss and accuracy leave the -1 positions
    out.

    `compile()` with no arguments follows the fine-tuning recipe (sec. 3.2,
    A.3): `kzoo.bert_finetuning_optimizer` (Adam, lr 5e-5, or 2e-3 with LoRA on; 10% warmup then
    linear decay, weight decay 0.01), sparse categorical cross-entropy on the
    logits with `ignore_class=-1`, and `TokenAccuracy` ("token_accuracy",
    over the labelled tokens only). A `sample_weight` in `fit` gives one
    weight per sentence, to each of its tokens.

    With `tags`, the names of the K labels (e.g. "O", "B-PER", "I-PER", ...),
    `predict_words` (alias `predict_labels`) returns tag strings,
    `evaluate_entities` scores entity-level F1 as CoNLL's `conlleval` (Table
    3's metric), `fit` and `evaluate` take word labels as tags too (mapped to
    ids before any work), and the tags are saved with the model and exported
    as Hugging Face's `id2label`/`label2id` (`from_preset(path, tags=[...])`
    renames a saved head's tags).

    Args:
        backbone: `kzoo.BertBackbone`. The encoder, kept as `self.backbone`.
        num_classes: int. K, the number of labels (9 for CoNLL-2003's BIO tags).
            Defaults to `None`: `len(tags)`.
        preprocessor: `kzoo.BertTokenClassifierPreprocessor` or None. Another
            BERT preprocessor or a `kzoo.BertTokenizer` is converted. With one,
            `fit`/`evaluate`/`predict` take sentences as words: lists of lists
            of str, a ragged string tensor, or white-space separated strings;
            labels are lists of label ids (or tags), one per word. Defaults to `None`.
        dropout: float. The dropout rate on T_i before the classification
            layer. Defaults to `0.1`.
        tags: list of str or None. The K label names; label id i is
            `tags[i]`. Defaults to `None`.
        **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Call arguments:
        inputs: dict. `token_ids`, `segment_ids` and `padding_mask`, each
            `(batch, sequence_length)`.

    Returns:
        Logits `(batch, sequence_length, num_classes)`; packed labels are
        `(batch, sequence_length)` ids, -1 where ignored.

    Example:

    >>> from kzoo import BertBackbone, BertTokenizer
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "mr", "bo", "##b", "ran"]
    >>> backbone = BertBackbone(vocabulary_size=len(vocabulary), num_layers=1,
    ...     num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=16)
    >>> model = BertTokenClassifier(backbone, num_classes=3, tags=["O", "B-PER", "I-PER"],
    ...     preprocessor=BertTokenClassifierPreprocessor(BertTokenizer(vocabulary), 8))
    >>> model.compile()
    >>> history = model.fit([["mr", "bob", "ran"]], [[0, 1, 0]], epochs=2, verbose=0)
    >>> model.predict([["mr", "bob", "ran"]], verbose=0).shape
    (1, 8, 3)
    >>> [len(tags) for tags in model.predict_words([["mr", "bob", "ran"], ["bob"]], verbose=0)]
    [3, 1]
    """

    preprocessor_class = BertTokenClassifierPreprocessor
    label_names_argument = "tags"
    default_optimizer = default_finetuning_optimizer

    def __init__(self, backbone, num_classes=None, preprocessor=None, dropout=0.1, tags=None, **kwargs):
        if num_classes is not None:
            _check_num_classes(num_classes)
        num_classes, tags = input_checks.check_names(tags, num_classes, "tags", type(self).__name__)
        _check_num_classes(num_classes)  # also one tag
        # === Layers ===
        head_dropout, head = dense_head(backbone, num_classes, dropout, "classifier_dropout", "logits")
        # === Functional model ===
        inputs = bert_inputs()
        sequence = backbone(inputs)["sequence_output"]  # (batch, seq, H)
        outputs = float32_logits(head(head_dropout(sequence)))  # (batch, seq, K)
        super().__init__(inputs, outputs, backbone=backbone, preprocessor=preprocessor, **kwargs)
        self.num_classes = num_classes
        self.dropout = dropout
        self.tags = tags
        self.classifier_dropout = head_dropout
        self.logits = head

    def unused_variables(self):
        """No loss reaches the pooler (`kzoo.models.Task.unused_variables`)."""
        return self.backbone.pooled_dense.weights if hasattr(self, "backbone") else []

    def label_bounds(self, packed):
        # Word labels are ids; packed token labels also hold -1 (ignored).
        return (IGNORED_LABEL if packed else 0, self.num_classes)

    def default_loss(self):
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=IGNORED_LABEL)

    def default_metrics(self):
        return [TokenAccuracy()]

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        return super().compute_loss(x, y, y_pred, _over_tokens(sample_weight, y), training)

    def loss_counts(self, y, sample_weight=None):
        """The labelled tokens of each sentence: the loss's mean is over them
        (sample weights scale tokens, they do not count them); under gradient
        accumulation `fit` normalises over a whole group's (`kzoo.models.accumulation`)."""
        return {"tokens": ops.sum(ops.cast(ops.not_equal(y, IGNORED_LABEL), "float32"), axis=-1)}


    # === Word-level predictions ===

    def predict_words(self, words, batch_size=None, verbose="auto"):
        """One predicted label per word, from its first sub-token's logits
        (BERT sec. 5.3).

        A word cut off by the preprocessor's truncation gets no prediction:
        -1, or "O" (outside any entity) when the model has `tags`.

        Args:
            words: list of lists of str. Sentences as words, as for `fit` (or
                a ragged string tensor, or white-space separated strings).
            batch_size: int or None. Sentences per batch. Defaults to `None`
                (32, as `keras.Model.predict`).
            verbose: str or int. As for `keras.Model.predict`. Defaults to `"auto"`.

        Returns:
            A list of lists: label ids, or tag strings with `tags`.

        Example:

        >>> from kzoo import BertBackbone, BertTokenizer
        >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "in", "ro", "##me"]
        >>> backbone = BertBackbone(vocabulary_size=len(vocabulary), num_layers=1,
        ...     num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=8)
        >>> model = BertTokenClassifier(backbone, num_classes=2,
        ...     preprocessor=BertTokenClassifierPreprocessor(BertTokenizer(vocabulary), 4))
        >>> labels = model.predict_words(["in rome", "in in in"], verbose=0)
        >>> labels[1][2]  # only "[CLS] in in [SEP]" fits: the third word is cut off
        -1
        """
        self._require_preprocessor()
        logits = self.predict(words, batch_size=batch_size, verbose=verbose)
        token_labels = np.argmax(logits, axis=-1)  # (batch, seq)
        positions = self.preprocessor.word_positions(words)  # (batch, words), -1: cut off
        rows, columns = positions.value_rowids().numpy(), positions.flat_values.numpy()
        labels = np.where(columns >= 0, token_labels[rows, columns], IGNORED_LABEL)
        sentences = positions.with_flat_values(labels).to_list()
        if self.tags is None:
            return sentences
        return [[self.tags[i] if i >= 0 else OUTSIDE_TAG for i in sentence] for sentence in sentences]

    def predict_labels(self, words, batch_size=None, verbose="auto"):
        """`predict_words` under the name `kzoo.BertClassifier` gives it: one
        label per word (BERT sec. 5.3), a tag with `tags`, else an id.

        Args:
            words: list of lists of str. Sentences as words, as for
                `predict_words` (or a ragged string tensor, or white-space
                separated strings).
            batch_size: int or None. Sentences per batch. Defaults to `None`
                (32, as `keras.Model.predict`).
            verbose: str or int. As for `keras.Model.predict`. Defaults to `"auto"`.

        Returns:
            A list of lists of tags (str), or of ids (int) without `tags`.

        Example:

        >>> from kzoo import BertBackbone, BertTokenizer
        >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "in", "rome"]
        >>> backbone = BertBackbone(vocabulary_size=len(vocabulary), num_layers=1,
        ...     num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=8)
        >>> model = BertTokenClassifier(backbone, tags=["O", "B-LOC"],
        ...     preprocessor=BertTokenClassifierPreprocessor(BertTokenizer(vocabulary), 8))
        >>> [set(tags) <= {"O", "B-LOC"} for tags in model.predict_labels(["in rome", "rome"], verbose=0)]
        [True, True]
        """
        return self.predict_words(words, batch_size=batch_size, verbose=verbose)

    def evaluate_entities(self, words, tags, batch_size=None, verbose="auto"):
        """Entity-level precision, recall and F1 of the predicted tags, as
        CoNLL's `conlleval` (BERT sec. 5.3, Table 3). Needs `tags`.

        Args:
            words: list of lists of str. Sentences as words, as for `predict_words`.
            tags: list of lists of str. The true tags, one list per sentence.
            batch_size: int or None. As for `predict_words`. Defaults to `None`.
            verbose: str or int. As for `predict_words`. Defaults to `"auto"`.

        Returns:
            `{"precision": float, "recall": float, "f1": float}`.

        Example:

        >>> from kzoo import BertBackbone, BertTokenizer
        >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "in", "rome"]
        >>> backbone = BertBackbone(vocabulary_size=len(vocabulary), num_layers=1,
        ...     num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=8)
        >>> model = BertTokenClassifier(backbone, num_classes=2, tags=["O", "B-LOC"],
        ...     preprocessor=BertTokenClassifierPreprocessor(BertTokenizer(vocabulary), 8))
        >>> scores = model.evaluate_entities(["in rome"], [["O", "B-LOC"]], verbose=0)
        >>> sorted(scores)
        ['f1', 'precision', 'recall']
        """
        if self.tags is None:
            raise ValueError(
                "evaluate_entities needs the tag names: build the model with tags=[...] "
                "(e.g. ['O', 'B-PER', 'I-PER', ...], tags[i] the name of label id i)."
            )
        return entity_f1(tags, self.predict_words(words, batch_size=batch_size, verbose=verbose))
