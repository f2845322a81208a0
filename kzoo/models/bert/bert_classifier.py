"""Sentence and sentence-pair classification with BERT (BERT sec. 3.2, 4.1; Figure 4a, 4b)."""

import keras
import numpy as np

from kzoo.models import input_checks
from kzoo.models.bert.bert_backbone import bert_inputs
from kzoo.models.bert.bert_heads import dense_head, float32_logits, pooled_logits
from kzoo.models.bert.bert_optimizer import default_finetuning_optimizer
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
    (sec. 3.2, A.3): `kzoo.bert_finetuning_optimizer` (Adam, lr 5e-5, or
    2e-3 with LoRA on; 10% warmup then linear decay, weight decay 0.01), sparse categorical
    cross-entropy on the logits and accuracy (regression: mean squared error,
    and the mean absolute error as metric; compute STS-B's Pearson and
    Spearman correlations on `predict`'s output over the whole set).

    With `class_names`, the K labels have names: `fit` and `evaluate` take
    labels as names too (mapped to ids before any work; an unknown name is a
    `ValueError` listing the known ones), `predict_labels` returns names, and
    the names are saved with the model (its config, preset directories,
    `.keras` files) and exported as Hugging Face's `id2label`/`label2id`;
    `from_preset(path, class_names=[...])` renames a saved head's classes.

    Args:
        backbone: `kzoo.BertBackbone`. The encoder, kept as `self.backbone`.
        num_classes: int. K, the number of labels (1 for regression).
            Defaults to `None`: `len(class_names)`.
        class_names: list of str. Names of the classes, in label order:
            label id i is `class_names[i]`. Defaults to `None`: the classes
            are 0..num_classes-1.
        preprocessor: `kzoo.BertPreprocessor`, `kzoo.BertTokenizer` or None.
            With one, `fit`/`evaluate`/`predict` take raw text: a batch of
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
    >>> named = BertClassifier(backbone, class_names=["negative", "positive"], preprocessor=preprocessor)
    >>> named.num_classes
    2
    >>> history = named.fit(["good film", "bad film"], ["positive", "negative"], verbose=0)
    >>> named.predict_labels(["good film"], verbose=0)[0] in ("negative", "positive")
    True
    >>> import tempfile
    >>> path = tempfile.mkdtemp()
    >>> named.save_to_preset(path)
    >>> BertClassifier.from_preset(path).class_names
    ['negative', 'positive']
    >>> BertClassifier.from_preset(path, class_names=["neg", "pos"]).class_names
    ['neg', 'pos']
    """

    preprocessor_class = BertPreprocessor
    label_names_argument = "class_names"
    default_optimizer = default_finetuning_optimizer

    def __init__(self, backbone, num_classes=None, preprocessor=None, dropout=0.1, class_names=None, **kwargs):
        bad = isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1
        if num_classes is not None and bad:
            raise ValueError(
                f"num_classes must be a positive int (the number of labels K, or 1 for "
                f"regression); got {num_classes!r}."
            )
        owner = type(self).__name__
        num_classes, class_names = input_checks.check_names(class_names, num_classes, "class_names", owner)
        # === Layers ===
        head_dropout, head = dense_head(backbone, num_classes, dropout, "classifier_dropout", "logits")
        # === Functional model ===
        inputs = bert_inputs()
        pooled = backbone(inputs)["pooled_output"]  # (batch, H)
        outputs = float32_logits(head(head_dropout(pooled)))  # (batch, K)
        super().__init__(inputs, outputs, backbone=backbone, preprocessor=preprocessor, **kwargs)
        self.num_classes = num_classes
        self.dropout = dropout
        self.class_names = class_names
        self.classifier_dropout = head_dropout
        self.logits = head

    def call(self, inputs, training=None, mask=None):
        # The graph of `__init__` gives the structure, shapes and weights; the
        # head reads only [CLS], so the last encoder layer runs at that row.
        return pooled_logits(self.backbone, self.complete_inputs(inputs), self.classifier_dropout, self.logits,
                             training)

    def predict_labels(self, x, batch_size=None, verbose="auto"):
        """The most likely class of each example: its name with `class_names`,
        else its id (the argmax of the logits, softmax(C W) in sec. 4.1).

        Args:
            x: list of str, a tuple `(texts_a, texts_b)`, or a dict. The
                examples, as for `predict`: raw text with a preprocessor, or
                packed inputs.
            batch_size: int or None. Examples per batch. Defaults to `None`
                (32, as `keras.Model.predict`).
            verbose: str or int. As for `keras.Model.predict`. Defaults to `"auto"`.

        Returns:
            A list: one class name (str) per example, or one id (int)
            without `class_names`.

        Example:

        >>> import keras
        >>> from kzoo import BertBackbone
        >>> backbone = BertBackbone(vocabulary_size=10, num_layers=1, num_heads=2,
        ...                         hidden_dim=8, intermediate_dim=16)
        >>> model = BertClassifier(backbone, class_names=["no", "yes"])
        >>> logits = keras.ops.convert_to_numpy(model.predict({"token_ids": [[2, 5, 3]]}, verbose=0))
        >>> model.predict_labels({"token_ids": [[2, 5, 3]]}, verbose=0) == [model.class_names[logits[0].argmax()]]
        True
        """
        if self.num_classes == 1:
            raise ValueError(
                "predict_labels needs classes: this BertClassifier (num_classes=1) is a regression; "
                "its `predict` gives the scores."
            )
        logits = self.predict(x, batch_size=batch_size, verbose=verbose)
        return input_checks.ids_to_names(np.argmax(logits, axis=-1), self.class_names)

    def check_label_shape(self, shape):
        """Labels are one class id (or score) per example, `(batch,)` or
        `(batch, 1)`, on every backend: one-hot rows are refused, not guessed."""
        shape = tuple(shape)
        if len(shape) <= 1 or (len(shape) == 2 and shape[1] in (1, None)):
            return
        one_hot = len(shape) == 2 and shape[1] == self.num_classes
        hint = (
            " They look one-hot: pass labels.argmax(axis=-1), the class ids." if one_hot
            else " Give one label per example."
        )
        raise ValueError(
            f"BertClassifier labels must be one class id per example, shape (batch,); got shape "
            f"{shape}.{hint}"
        )

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
