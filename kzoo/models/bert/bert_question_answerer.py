"""Extractive question answering with BERT: SQuAD v1.1 and v2.0 (BERT sec. 4.2, 4.3; Figure 4c)."""

import keras

from kzoo.models.bert import bert_squad_metrics
from kzoo.models.bert.bert_backbone import bert_initializer, bert_inputs
from kzoo.models.bert.bert_heads import float32_logits
from kzoo.models.bert.bert_optimizer import default_finetuning_optimizer
from kzoo.models.bert.bert_question_answerer_preprocessor import (
    FEATURES,
    BertQuestionAnswererPreprocessor,
)
from kzoo.models.task import Task

# The preprocessor's labels, keyed by the output each one scores.
LABEL_OF_OUTPUT = {"start_logits": "start_positions", "end_logits": "end_positions"}
# run_squad.py's windows: 384 tokens, stride 128, questions of at most 64 tokens.
SQUAD_SEQUENCE_LENGTH = 384


@keras.saving.register_keras_serializable(package="kzoo")
class BertQuestionAnswerer(Task):
    """BERT for extractive question answering, SQuAD style (BERT sec. 4.2, 4.3).

    "We only introduce a start vector S ∈ R^H and an end vector E ∈ R^H
    during fine-tuning. The probability of word i being the start of the
    answer span is computed as a dot product between T_i and S followed by a
    softmax over all of the words in the paragraph" (sec. 4.2); E likewise for
    the end. As in google-research/bert's `run_squad.py`: S and E are the two
    columns of one dense layer on the final hidden states T, with no dropout
    before it, and the softmax runs over all positions of a window. The
    question is sentence A, the passage sentence B; a long passage is split
    into overlapping windows by the preprocessor.

    `compile()` with no arguments follows the fine-tuning recipe (sec. 3.2,
    A.3; the paper trains 3 epochs at lr 5e-5, batch 32, on SQuAD v1.1 and 2
    epochs, batch 48, on v2.0) with the objective of sec. 4.2, the
    log-likelihoods of the correct start and end positions: sparse categorical
    cross-entropy on each, averaged (loss weights 0.5) as `run_squad.py` does,
    which halves the paper's sum. Metrics are the start and end accuracies per
    window. SQuAD v2.0 (sec. 4.3) needs no other head: a window without the
    answer is labelled with the `[CLS]` position, whose score s_null = S·C +
    E·C competes with the best span when decoding (`answer`).

    Args:
        backbone: `kzoo.BertBackbone`. The encoder, kept as `self.backbone`.
        preprocessor: `kzoo.BertQuestionAnswererPreprocessor` or None. Another
            BERT preprocessor or a `kzoo.BertTokenizer` is converted. With one,
            `fit`/`evaluate`/`predict` take raw text. A tokenizer gets windows
            of min(384, `backbone.max_sequence_length`) tokens, another
            preprocessor keeps its `sequence_length`; both get `run_squad.py`'s
            stride 128 and question cut 64 scaled to it (1/3 and 1/6 of the
            window). Defaults to `None`.
        **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Call arguments:
        inputs: dict. `token_ids`, `segment_ids` and `padding_mask`, each
            `(windows, sequence_length)`.

    Returns:
        `{"start_logits": (windows, sequence_length), "end_logits": (windows,
        sequence_length)}`, float32: S·T_i and E·T_i.

    Labels: with raw text `x = (questions, contexts)`, `y = (answer_starts,
    answer_texts)` as SQuAD gives them (a character offset and the text; -1
    and "" for no answer), and each question becomes one or more windows; with
    packed inputs, `{"start_positions", "end_positions"}`, one per window.

    Example:

    >>> import numpy as np
    >>> from kzoo import BertBackbone, BertTokenizer
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    ...               "who", "sat", "the", "cat", "dog", "ran"]
    >>> backbone = BertBackbone(vocabulary_size=len(vocabulary), num_layers=1,
    ...     num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=16)
    >>> model = BertQuestionAnswerer(backbone, preprocessor=BertTokenizer(vocabulary))
    >>> model.compile()
    >>> questions, contexts = ["who sat", "who ran"], ["the cat sat", "the dog ran"]
    >>> history = model.fit((questions, contexts), ([4, 4], ["cat", "dog"]), epochs=2, verbose=0)
    >>> logits = model.predict((questions, contexts), verbose=0)
    >>> logits["start_logits"].shape, logits["end_logits"].shape
    ((2, 16), (2, 16))
    >>> len(model.answer(questions, contexts))
    2
    """

    preprocessor_class = BertQuestionAnswererPreprocessor
    default_optimizer = default_finetuning_optimizer
    default_sequence_length = SQUAD_SEQUENCE_LENGTH

    def __init__(self, backbone, preprocessor=None, **kwargs):
        # === Layers ===
        head = keras.layers.Dense(
            2, kernel_initializer=bert_initializer(), dtype=backbone.dtype_policy, name="span_logits"
        )
        # === Functional model ===
        inputs = bert_inputs()
        sequence = backbone(inputs)["sequence_output"]  # T: (windows, seq, H)
        logits = head(sequence)  # (windows, seq, 2): S·T_i and E·T_i
        spans = {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}
        outputs = {name: float32_logits(tensor, name) for name, tensor in spans.items()}
        super().__init__(inputs, outputs, backbone=backbone, preprocessor=preprocessor, **kwargs)
        self.span_logits = head

    @classmethod
    def preprocessor_for(cls, tokenizer, sequence_length):
        """`run_squad.py`'s windows of 384 tokens, stride 128 and questions cut
        at 64 (BERT sec. 4.2), scaled to `sequence_length`."""
        return BertQuestionAnswererPreprocessor(
            tokenizer,
            sequence_length=sequence_length,
            document_stride=sequence_length // 3,
            max_question_length=sequence_length // 6,
        )

    # === Training ===

    def unused_variables(self):
        """No loss reaches the pooler (`kzoo.models.Task.unused_variables`)."""
        return self.backbone.pooled_dense.weights if hasattr(self, "backbone") else []

    def default_loss(self):
        return {name: keras.losses.SparseCategoricalCrossentropy(from_logits=True) for name in LABEL_OF_OUTPUT}

    def default_metrics(self):
        # Keras resolves "accuracy" to SparseCategoricalAccuracy for these
        # labels; reported as start_logits_accuracy and end_logits_accuracy.
        return {name: ["accuracy"] for name in LABEL_OF_OUTPUT}

    def compile(self, optimizer=None, loss="auto", metrics="auto", **kwargs):
        """`kzoo.models.Task.compile`; the default loss averages the start and end
        cross-entropies (`run_squad.py`'s `(start_loss + end_loss) / 2`, sec. 4.2)."""
        if loss == "auto":
            kwargs.setdefault("loss_weights", {name: 0.5 for name in LABEL_OF_OUTPUT})
        super().compile(optimizer, loss=loss, metrics=metrics, **kwargs)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        return super().compute_loss(x, self._labels_by_output(y), y_pred, sample_weight, training)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        return super().compute_metrics(x, self._labels_by_output(y), y_pred, sample_weight)

    def _labels_by_output(self, y):
        """Keras pairs labels with outputs by key: `start_positions` goes with
        `start_logits`, `end_positions` with `end_logits`."""
        if not isinstance(y, dict) or set(y) != set(LABEL_OF_OUTPUT.values()):
            found = sorted(y) if isinstance(y, dict) else type(y).__name__
            raise ValueError(
                f"{type(self).__name__} takes labels {{'start_positions', 'end_positions'}} "
                f"(int token positions per window) with packed inputs, or (answer_starts, "
                f"answer_texts) with raw text; got {found}."
            )
        return {output: y[label] for output, label in LABEL_OF_OUTPUT.items()}

    # === Answers ===

    def answer(self, questions, contexts, max_answer_length=30, null_score_threshold=None, batch_size=32):
        """The answer text for each question, cut from its context (BERT sec. 4.2, 4.3).

        Every context is split into windows, the logits of all windows are
        predicted, and the best span i..j (i <= j, at most
        `max_answer_length` tokens, scored S·T_i + E·T_j over the example's
        windows) is returned as it is written in the context. With
        `null_score_threshold=τ` (SQuAD v2.0) the answer is "" unless the span
        scores more than s_null + τ, s_null = S·C + E·C (sec. 4.3); the paper
        picks τ on the dev set to maximize F1. See `kzoo.models.bert.bert_squad_metrics.decode_answers`.

        Args:
            questions: list of str. The questions (or a 1-D array of strings).
            contexts: list of str. One context per question (or a 1-D array).
            max_answer_length: int. The longest answer in tokens. Defaults to
                `30`, as in `run_squad.py`.
            null_score_threshold: float or None. τ for SQuAD v2.0. Defaults to
                `None`: always answer (v1.1).
            batch_size: int. Windows per `predict` batch. Defaults to `32`.

        Returns:
            A list of strings, one per question ("" for no answer).

        Example (an untrained model: the span is arbitrary, but always from the context):

        >>> from kzoo import BertBackbone, BertTokenizer
        >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "who", "sat", "the", "cat"]
        >>> backbone = BertBackbone(vocabulary_size=len(vocabulary), num_layers=1,
        ...     num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=16)
        >>> model = BertQuestionAnswerer(backbone, preprocessor=BertTokenizer(vocabulary))
        >>> model.answer(["who sat"], ["The cat sat"])[0] in {"The", "cat", "sat", "The cat",
        ...                                                  "cat sat", "The cat sat"}
        True
        >>> model.answer(["who sat"], ["The cat sat"], null_score_threshold=1e9)
        ['']
        """
        self._require_preprocessor()
        windows = self.preprocessor.windows((questions, contexts))
        features = {key: windows[key].numpy() for key in FEATURES}
        logits = self.predict(features, batch_size=batch_size, verbose=0)
        return bert_squad_metrics.decode_answers(
            logits["start_logits"], logits["end_logits"], windows, contexts,
            max_answer_length=max_answer_length, null_score_threshold=null_score_threshold,
        )

    def evaluate_answers(self, questions, contexts, answers, **answer_kwargs):
        """SQuAD's official exact match and F1, in percent, of `answer`'s
        predictions (BERT sec. 4.2 Table 2, sec. 4.3 Table 3).

        Args:
            questions: list of str. As for `answer`.
            contexts: list of str. As for `answer`.
            answers: list of str or of lists of str. Per question, its gold
                answer(s) ("" or an empty list: no answer, SQuAD v2.0).
            **answer_kwargs: `max_answer_length`, `null_score_threshold`, `batch_size`.

        Returns:
            `{"exact_match": float, "f1": float}`.

        Example:

        >>> from kzoo import BertBackbone, BertTokenizer
        >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "who", "sat", "the", "cat"]
        >>> backbone = BertBackbone(vocabulary_size=len(vocabulary), num_layers=1,
        ...     num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=16)
        >>> model = BertQuestionAnswerer(backbone, preprocessor=BertTokenizer(vocabulary))
        >>> model.evaluate_answers(["who sat"], ["the cat sat"], [[]], null_score_threshold=1e9)
        {'exact_match': 100.0, 'f1': 100.0}
        """
        return bert_squad_metrics.squad_metrics(self.answer(questions, contexts, **answer_kwargs), answers)
