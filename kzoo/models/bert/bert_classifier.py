"""Sentence and sentence-pair classification with BERT (BERT sec. 3.2, 4.1; Figure 4a, 4b)."""

import keras

from kzoo.models.bert.bert_backbone import bert_inputs
from kzoo.models.bert.bert_heads import dense_head, float32_logits
from kzoo.models.bert.bert_optimizer import bert_finetuning_optimizer
from kzoo.models.bert.bert_preprocessor import BertPreprocessor
from kzoo.models.task import Task


@keras.saving.register_keras_serializable(package="kzoo")
class BertClassifier(Task):
    """BERT with a classification layer on `[CLS]`: softmax(C W) (BERT sec. 4.1).

    "The only new parameters introduced during fine-tuning are classification
    layer weights W ∈ R^{K×H}" (sec. 4.1). C is the backbone's pooled output,
    the tanh layer on the final `[CLS]` state that next sentence prediction
    trained, as in google-research/bert's `run_classifier.py`, with dropout
    0.1 before W. Single sentences and sentence pairs (GLUE, Figure 4a/4b);
    `num_classes=1` gives a regression score (STS-B), trained with the mean
    squared error.

    `compile()` with no arguments follows the paper's fine-tuning recipe
    (sec. 3.2, A.3): `kzoo.bert_finetuning_optimizer` (Adam, lr 5e-5, 10%
    warmup then linear decay, weight decay 0.01), sparse categorical
    cross-entropy on the logits and accuracy (regression: mean squared error,
    and the mean absolute error as metric; compute STS-B's Pearson and
    Spearman correlations on `predict`'s output over the whole set).

    Args:
        backbone: `kzoo.BertBackbone`. The encoder, kept as `self.backbone`.
        num_classes: int. K, the number of labels (1 for regression).
        preprocessor: `kzoo.BertPreprocessor`, `kzoo.BertTokenizer` or None. With
            one, `fit`/`evaluate`/`predict` take raw text: a batch of
            strings, or a tuple `(texts_a, texts_b)` for pairs. Defaults to `None`.
        dropout: float. The dropout rate on C before the classification
            layer. Defaults to `0.1`.
        **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Call arguments:
        inputs: dict. `token_ids`, `segment_ids` and `padding_mask`, each
            `(batch, sequence_length)`.

    Returns:
        Logits `(batch, num_classes)`.

    Example:

    >>> import numpy as np
    >>> from kzoo import BertBackbone, BertPreprocessor, BertTokenizer
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film"]
    >>> backbone = BertBackbone(vocabulary_size=len(vocabulary), num_layers=1,
    ...     num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=16)
    >>> preprocessor = BertPreprocessor(BertTokenizer(vocabulary), sequence_length=8)
    >>> model = BertClassifier(backbone, num_classes=2, preprocessor=preprocessor)
    >>> model.compile()
    >>> history = model.fit(["good film", "bad film"], np.array([1, 0]), epochs=2, verbose=0)
    >>> model.predict(["good film"], verbose=0).shape
    (1, 2)
    """

    preprocessor_class = BertPreprocessor
    default_optimizer = staticmethod(bert_finetuning_optimizer)

    def __init__(self, backbone, num_classes, preprocessor=None, dropout=0.1, **kwargs):
        if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
            raise ValueError(
                f"num_classes must be a positive int (the number of labels K, or 1 for "
                f"regression); got {num_classes!r}."
            )
        # === Layers ===
        head_dropout, head = dense_head(backbone, num_classes, dropout, "classifier_dropout", "logits")
        # === Functional model ===
        inputs = bert_inputs()
        pooled = backbone(inputs)["pooled_output"]  # (batch, H)
        outputs = float32_logits(head(head_dropout(pooled)))  # (batch, K)
        super().__init__(inputs, outputs, backbone=backbone, preprocessor=preprocessor, **kwargs)
        self.num_classes = num_classes
        self.dropout = dropout
        self.classifier_dropout = head_dropout
        self.logits = head

    def label_bounds(self, packed):
        return None if self.num_classes == 1 else (0, self.num_classes)

    def default_loss(self):
        if self.num_classes == 1:
            return keras.losses.MeanSquaredError()
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        if self.num_classes == 1:
            return [keras.metrics.MeanAbsoluteError(name="mean_absolute_error")]
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
