"""Multiple choice with BERT: SWAG (BERT sec. 4.4)."""

import keras
from keras import ops

from kzoo.models.bert.bert_backbone import bert_inputs
from kzoo.models.bert.bert_heads import dense_head, float32_logits, pooled_logits
from kzoo.models.bert.bert_multiple_choice_preprocessor import BertMultipleChoicePreprocessor
from kzoo.models.bert.bert_optimizer import default_finetuning_optimizer
from kzoo.models.task import Task


class _FoldChoices(keras.layers.Layer):
    """(batch, num_choices, seq) -> (batch * num_choices, seq)."""

    def call(self, x):
        return ops.reshape(x, (-1, ops.shape(x)[-1]))

    def compute_output_shape(self, input_shape):
        return (None, input_shape[-1])


@keras.saving.register_keras_serializable(package="kzoo")
class BertMultipleChoice(Task):
    """BERT for multiple choice, SWAG style (BERT sec. 4.4).

    Each (context, choice) pair is encoded separately; "the only
    task-specific parameters introduced is a vector whose dot product with the
    [CLS] token representation C denotes a score for each choice which is
    normalized with a softmax layer" (sec. 4.4). C is the pooled `[CLS]`
    output (as for `kzoo.BertClassifier`), with dropout 0.1 before the
    vector. `compile()` uses the fine-tuning recipe (sec. 3.2, A.3; the paper
    fine-tunes SWAG with lr 2e-5: pass
    `optimizer=kzoo.bert_finetuning_optimizer(total_steps, learning_rate=2e-5)`),
    sparse categorical cross-entropy over the choices and accuracy.

    Args:
        backbone: `kzoo.BertBackbone`. The encoder, kept as `self.backbone`.
        num_choices: int. The number of candidates per example (4 in SWAG).
        preprocessor: `kzoo.BertMultipleChoicePreprocessor` or None. Another
            BERT preprocessor or a `kzoo.BertTokenizer` is converted. With one,
            `fit`/`predict` take `(contexts, choices)` raw strings. Defaults to `None`.
        dropout: float. The dropout rate on C. Defaults to `0.1`.
        **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Call arguments:
        inputs: dict. `token_ids`, `segment_ids` and `padding_mask`, each
            `(batch, num_choices, sequence_length)`.

    Returns:
        Logits `(batch, num_choices)`; labels are the index of the right choice.

    Example:

    >>> import numpy as np
    >>> from kzoo import BertBackbone, BertTokenizer
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "he", "ran", "sat", "away"]
    >>> backbone = BertBackbone(vocabulary_size=len(vocabulary), num_layers=1,
    ...     num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=16)
    >>> model = BertMultipleChoice(backbone, num_choices=2,
    ...     preprocessor=BertMultipleChoicePreprocessor(BertTokenizer(vocabulary), 8))
    >>> model.predict((["he"], [["ran away", "sat"]]), verbose=0).shape
    (1, 2)
    """

    preprocessor_class = BertMultipleChoicePreprocessor
    default_optimizer = default_finetuning_optimizer

    def __init__(self, backbone, num_choices, preprocessor=None, dropout=0.1, **kwargs):
        if isinstance(num_choices, bool) or not isinstance(num_choices, int) or num_choices < 2:
            raise ValueError(f"num_choices must be an int >= 2 (4 for SWAG); got {num_choices!r}.")
        # === Layers ===
        fold = _FoldChoices(name="fold_choices")
        head_dropout, head = dense_head(backbone, 1, dropout, "choice_dropout", "choice_score")
        # === Functional model ===
        inputs = bert_inputs(leading_shape=(num_choices,))
        pooled = backbone({name: fold(tensor) for name, tensor in inputs.items()})["pooled_output"]
        outputs = float32_logits(ops.reshape(head(head_dropout(pooled)), (-1, num_choices)))
        super().__init__(inputs, outputs, backbone=backbone, preprocessor=preprocessor, **kwargs)
        self.num_choices = num_choices
        self.dropout = dropout
        self.fold_choices = fold
        self.choice_dropout = head_dropout
        self.choice_score = head

    def call(self, inputs, training=None, mask=None):
        # As `BertClassifier.call`: the head reads only [CLS], so the last
        # encoder layer runs at that row (same outputs as the graph of `__init__`).
        folded = {name: self.fold_choices(tensor) for name, tensor in self.complete_inputs(inputs).items()}
        scores = pooled_logits(self.backbone, folded, self.choice_dropout, self.choice_score, training)
        return ops.reshape(scores, (-1, self.num_choices))

    head_size = "num_choices"

    def label_bounds(self, packed):
        return (0, self.num_choices)

    def default_loss(self):
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
