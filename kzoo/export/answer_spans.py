"""SQuAD answers decoded inside a TensorFlow graph (BERT sec. 4.2, 4.3), for
the SavedModel of a `kzoo.BertQuestionAnswerer`: questions and contexts in,
answer strings out.

The same decoding as `kzoo.models.bert.bert_squad_metrics.decode_answers`
(NumPy, what `BertQuestionAnswerer.answer` runs), in TensorFlow ops: per
window the best span i <= j < i + max_answer_length scored S·T_i + E·T_j
(float64, as NumPy), starting on a token with its maximal context in that
window; per question the best span over its windows (the first window on a
tie), cut from the context by character offsets; with a threshold τ
(SQuAD v2.0) "" unless the span scores more than s_null + τ.
"""

import tensorflow as tf

from kzoo.export.serving import Serving, strings
from kzoo.models.bert.bert_question_answerer_preprocessor import FEATURES
from kzoo.models.input_checks import check_int

NEG_INF = float("-inf")


def decode_in_graph(start_logits, end_logits, windows, contexts, max_answer_length=30, null_score_threshold=None):
    """Answers from per-window span logits, in TensorFlow ops (BERT sec. 4.2, 4.3).

    Args:
        start_logits: float tensor `(windows, sequence_length)`. S·T_i.
        end_logits: float tensor `(windows, sequence_length)`. E·T_j.
        windows: dict. `BertQuestionAnswererPreprocessor.windows(x)`.
        contexts: 1-D `tf.string` tensor. The contexts, one per question.
        max_answer_length: int. The longest answer in tokens. Defaults to `30`.
        null_score_threshold: float or None. τ (SQuAD v2.0). Defaults to `None`: always answer.

    Returns:
        A dict, one row per question: `answer` (str, "" for none),
        `answer_start` and `answer_end` (int32 character offsets of the
        answer in its context, -1 for none), `score` (the best span's score)
        and `null_score` (s_null, the lowest `[CLS]` score of its windows), float32.

    Example: one window, context tokens at positions 1 and 2.

    >>> windows = {"example_index": tf.constant([0]), "token_start_offsets": tf.constant([[-1, 0, 6, -1]]),
    ...            "token_end_offsets": tf.constant([[-1, 5, 10, -1]]),
    ...            "token_is_max_context": tf.constant([[False, True, True, False]])}
    >>> start, end = tf.constant([[3., 2., 1., 0.]]), tf.constant([[0., 1., 2., 0.]])
    >>> decode_in_graph(start, end, windows, tf.constant(["Hello Café"]))["answer"].numpy()[0].decode()
    'Hello Café'
    """
    start = tf.cast(start_logits, tf.float64)
    end = tf.cast(end_logits, tf.float64)
    length = tf.shape(start)[1]
    first = tf.range(length)[:, None]
    last = tf.range(length)[None, :]
    allowed = (last >= first) & (last < first + max_answer_length)  # (seq, seq): i <= j < i + max
    starts, ends = windows["token_start_offsets"], windows["token_end_offsets"]
    in_context = starts >= 0
    allowed = (
        allowed[None] & (in_context & tf.cast(windows["token_is_max_context"], tf.bool))[:, :, None]
        & in_context[:, None, :]
    )
    scores = tf.reshape(tf.where(allowed, start[:, :, None] + end[:, None, :], NEG_INF), [tf.shape(start)[0], -1])
    best = tf.argmax(scores, axis=1, output_type=tf.int32)  # the first of equal scores, as np.argmax
    window_scores = tf.reduce_max(scores, axis=1)

    # Per question: the first window reaching its best score (decode_answers keeps a strictly better one).
    example = tf.cast(windows["example_index"], tf.int32)
    num_examples = tf.size(contexts)
    num_windows = tf.size(example)
    score = tf.math.unsorted_segment_max(window_scores, example, num_examples)
    best_window = (window_scores == tf.gather(score, example)) & (window_scores > NEG_INF)
    window = tf.math.unsorted_segment_min(tf.where(best_window, tf.range(num_windows), num_windows), example,
                                          num_examples)
    answered = window < num_windows
    window = tf.minimum(window, num_windows - 1)
    span = tf.gather(best, window)
    answer_start = tf.gather_nd(starts, tf.stack([window, span // length], axis=1))
    answer_end = tf.gather_nd(ends, tf.stack([window, span % length], axis=1))
    null_score = tf.math.unsorted_segment_min(start[:, 0] + end[:, 0], example, num_examples)
    if null_score_threshold is not None:  # sec. 4.3: an answer only when ŝ_ij > s_null + τ
        answered &= score > null_score + null_score_threshold
    answer_start = tf.where(answered, answer_start, -1)
    answer_end = tf.where(answered, answer_end, -1)
    text = tf.strings.substr(contexts, tf.maximum(answer_start, 0), tf.maximum(answer_end - answer_start, 0),
                             unit="UTF8_CHAR")
    return {
        "answer": tf.where(answered, text, ""),
        "answer_start": answer_start,
        "answer_end": answer_end,
        "score": tf.cast(score, tf.float32),
        "null_score": tf.cast(null_score, tf.float32),
    }


def serve_answers(model, preprocessor, max_answer_length=30, null_score_threshold=None):
    """A `kzoo.BertQuestionAnswerer`'s serving (BERT sec. 4.2, 4.3):
    `question` and `context` strings in, as `BertQuestionAnswerer.answer`
    with the same arguments; outputs as `decode_in_graph`.

    Args:
        model: `kzoo.BertQuestionAnswerer`. The model.
        preprocessor: `kzoo.BertQuestionAnswererPreprocessor`. Its preprocessor (windows).
        max_answer_length: int. The longest answer in tokens. Defaults to `30`.
        null_score_threshold: float or None. τ for SQuAD v2.0. Defaults to `None`: always answer (v1.1).

    Returns:
        A `kzoo.export.serving.Serving`.

    Example:

    >>> from kzoo import BertBackbone, BertQuestionAnswerer, BertTokenizer
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "who", "sat", "the", "cat"]
    >>> backbone = BertBackbone(vocabulary_size=len(vocabulary), num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16, max_sequence_length=16)
    >>> model = BertQuestionAnswerer(backbone, preprocessor=BertTokenizer(vocabulary))
    >>> serving = serve_answers(model, model.preprocessor)
    >>> answer = serving.function(tf.constant(["who sat"]), tf.constant(["The cat sat"]))["answer"]
    >>> answer.numpy()[0].decode() == model.answer(["who sat"], ["The cat sat"])[0]
    True
    """
    max_answer_length = check_int(max_answer_length, "max_answer_length", "BertQuestionAnswerer.export")
    threshold = null_score_threshold
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))):
        raise ValueError(
            "BertQuestionAnswerer.export: null_score_threshold must be a number (τ of BERT sec. 4.3) "
            f"or None; got {threshold!r}."
        )

    def function(question, context):
        windows = preprocessor.windows((question, context))
        logits = model({key: windows[key] for key in FEATURES}, training=False)
        return decode_in_graph(logits["start_logits"], logits["end_logits"], windows, context, max_answer_length,
                               None if threshold is None else float(threshold))

    return Serving([strings("question"), strings("context")], function)
