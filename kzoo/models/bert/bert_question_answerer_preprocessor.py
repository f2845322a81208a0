"""SQuAD inputs for BERT: a question and a long context become windows
`[CLS] question [SEP] context-window [SEP]` with answer-span labels
(BERT sec. 4.2, SQuAD v1.1; sec. 4.3, SQuAD v2.0 with no-answer examples).

The packing is google-research/bert's `run_squad.py` (`convert_examples_to_features`):
the question is cut to `max_question_length` tokens; the context is split into
windows ("doc spans") of at most `sequence_length - len(question) - 3` tokens
that start every `document_stride` tokens, the last one reaching the end of the
context; a window whose answer is not wholly inside it, or an example without
answer, is labelled with the [CLS] position (0, 0).

Everything runs in TensorFlow ops, so it works inside `tf.data.Dataset.map` on
a batch whatever `KERAS_BACKEND` is; one example gives one or more windows, so
the output has more rows than the input. `kzoo.models.bert.bert_squad_metrics` decodes the
model's logits back into answer text with the bookkeeping from `windows`.
"""

import keras
import numpy as np
import tensorflow as tf

from kzoo.data.packing import keep_first, pack_segments
from kzoo.models.bert.bert_tokenizer import BertTokenizer
from kzoo.models.input_checks import check_ints
from kzoo.models.preprocessor import Preprocessor
from kzoo.tokenizers.inputs import to_string_tensor

FEATURES = ("token_ids", "segment_ids", "padding_mask")


def _require(ok, message):
    """Eagerly raises `ValueError(message)` unless all of `ok` holds; in a graph
    returns the assertion op (a `tf.errors.InvalidArgumentError` carrying `message`)."""
    if tf.executing_eagerly():
        bad = np.flatnonzero(~ok.numpy())
        if bad.size:
            raise ValueError(message + (f" (first at example {bad[0]})" if ok.shape.rank else ""))
        return []
    return [tf.debugging.Assert(tf.reduce_all(ok), [message])]


def _char_offsets(byte_offsets, contexts):
    """Byte offsets (ragged `(batch, None)` into UTF-8 `contexts`) as Unicode
    character offsets: the number of characters that start before each byte."""
    _, char_starts = tf.strings.unicode_decode_with_offsets(contexts, "UTF-8")
    # Offsets made global over the batch (each row shifted by the bytes before
    # it), so one sorted search serves every row.
    byte_base = tf.cumsum(tf.cast(tf.strings.length(contexts), tf.int64), exclusive=True)
    all_char_starts = char_starts.flat_values + tf.gather(byte_base, char_starts.value_rowids())
    rows = byte_offsets.value_rowids()
    chars = tf.searchsorted(
        all_char_starts, byte_offsets.flat_values + tf.gather(byte_base, rows), out_type=tf.int64
    )
    return byte_offsets.with_flat_values(chars - tf.gather(char_starts.row_starts(), rows))


@keras.saving.register_keras_serializable(package="kzoo")
class BertQuestionAnswererPreprocessor(Preprocessor):
    """Windows of `[CLS] question [SEP] context [SEP]` and answer-span labels
    for SQuAD (BERT sec. 4.2 and sec. 4.3), as in google-research's `run_squad.py`.

    Each context is split into windows of at most `sequence_length -
    len(question) - 3` tokens starting every `document_stride` tokens (the
    last one reaching the end; a short context gives one window). Segment ids
    are 0 for `[CLS]`, the question and its `[SEP]`, 1 for the window and its
    `[SEP]`. A window's labels are the positions of the answer's first and
    last token in the packed sequence, or 0 and 0 (the `[CLS]` position) when
    the answer is not wholly inside the window or the example has none.

    Args:
        tokenizer: `kzoo.BertTokenizer`. The WordPiece tokenizer.
        sequence_length: int. Tokens per window. Defaults to `384`, as in
            BERT's SQuAD runs.
        document_stride: int. Tokens between the starts of consecutive
            windows, smaller than the room left for the context, so that
            windows overlap. Defaults to `128`.
        max_question_length: int. Questions are cut to this many tokens.
            Defaults to `64`.
        padding: str. `"longest"`: each batch padded only to the ladder length
            (`kzoo.data.length_ladder`) at or above its longest text;
            `"max_length"`: to `sequence_length`. Defaults to `"longest"`.

    Call arguments:
        x: tuple. `(questions, contexts)`, two equally long 1-D batches of
            strings (lists, numpy arrays or `tf.string` tensors).
        y: tuple or None. `(answer_starts, answer_texts)`: SQuAD's
            `answer_start`, a CHARACTER offset into the context, and the
            answer's text; a no-answer example (SQuAD 2.0) has `-1` and `""`.
            Defaults to `None`.
        sample_weight: tensor or None. One weight per example; repeated for
            its windows. Defaults to `None`.

    Returns:
        `{"token_ids", "segment_ids", "padding_mask"}`, int32 `(windows,
        sequence_length)`, and with `y` the labels `{"start_positions",
        "end_positions"}`, int32 `(windows,)`, packed by
        `keras.utils.pack_x_y_sample_weight`. `windows(x)` adds the
        bookkeeping that maps predicted spans back to text.

    Example:

    >>> from kzoo import BertTokenizer
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    ...               "who", "sat", "the", "cat", "on", "mat"]
    >>> preprocessor = BertQuestionAnswererPreprocessor(
    ...     BertTokenizer(vocabulary), sequence_length=8, document_stride=1,
    ...     max_question_length=2)
    >>> x, y = preprocessor((["who sat"], ["the cat sat on the mat"]), ([4], ["cat"]))
    >>> x["token_ids"].numpy().tolist()
    [[2, 5, 6, 3, 7, 8, 6, 3], [2, 5, 6, 3, 8, 6, 9, 3], [2, 5, 6, 3, 6, 9, 7, 3], [2, 5, 6, 3, 9, 7, 10, 3]]
    >>> y["start_positions"].numpy().tolist(), y["end_positions"].numpy().tolist()
    ([5, 4, 0, 0], [5, 4, 0, 0])
    """

    tokenizer_class = BertTokenizer

    def __init__(
        self, tokenizer, sequence_length=384, document_stride=128, max_question_length=64, padding="longest"
    ):
        check_ints("BertQuestionAnswererPreprocessor", sequence_length=sequence_length,
                   document_stride=document_stride, max_question_length=max_question_length)
        if document_stride < 1 or max_question_length < 1:
            raise ValueError(
                f"document_stride={document_stride} and max_question_length={max_question_length} "
                "must both be positive (BERT's SQuAD runs use 128 and 64)."
            )
        room = sequence_length - max_question_length - 3
        if room < 2:
            raise ValueError(
                f"sequence_length={sequence_length} leaves {room} context tokens per window "
                f"after a question of max_question_length={max_question_length} tokens, [CLS] "
                f"and two [SEP]; use sequence_length >= {max_question_length + 5} or a smaller "
                "max_question_length."
            )
        if document_stride >= room:
            raise ValueError(
                f"document_stride={document_stride} must be smaller than the context room of a "
                f"window, sequence_length - max_question_length - 3 = {room}, so that windows "
                "overlap; lower document_stride or raise sequence_length."
            )
        super().__init__(tokenizer, padding)
        self.sequence_length = int(sequence_length)
        self.document_stride = int(document_stride)
        self.max_question_length = int(max_question_length)

    def call(self, x, y=None, sample_weight=None):
        questions, contexts = self._inputs(x)
        outputs, layout = self._windows(questions, contexts)
        features = {key: outputs[key] for key in FEATURES}
        if y is not None:
            y = self._labels(y, contexts, layout)
        if sample_weight is not None:  # one per example, repeated for its windows
            sample_weight = tf.gather(sample_weight, outputs["example_index"])
        return keras.utils.pack_x_y_sample_weight(features, y, sample_weight)

    def windows(self, x):
        """The windows with what `kzoo.models.bert.bert_squad_metrics.decode_answers` needs
        to turn predicted spans back into text (BERT sec. 4.2).

        Args:
            x: tuple. `(questions, contexts)`, as for calling the preprocessor.

        Returns:
            A dict of tensors, one row per window:
            `token_ids`, `segment_ids`, `padding_mask` (the model's inputs),
            `example_index` `(windows,)`: the input example of each window
            (counted from 0 in each call, so per batch inside `tf.data`);
            `token_start_offsets`, `token_end_offsets` `(windows, sequence_length)`:
            each context token's character span `[start, end)` in its context,
            -1 for `[CLS]`, question, `[SEP]` and padding;
            `token_is_max_context` `(windows, sequence_length)`: True where the
            token has more context in this window than in any other
            (`run_squad.py`'s `_check_is_max_context`; the first window wins a tie).

        Example:

        >>> from kzoo import BertTokenizer
        >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c"])
        >>> preprocessor = BertQuestionAnswererPreprocessor(
        ...     tokenizer, sequence_length=8, document_stride=1, max_question_length=1)
        >>> w = preprocessor.windows((["a"], ["b c b c b"]))
        >>> w["example_index"].numpy().tolist()
        [0, 0]
        >>> w["token_start_offsets"].numpy().tolist()
        [[-1, -1, -1, 0, 2, 4, 6, -1], [-1, -1, -1, 2, 4, 6, 8, -1]]
        >>> w["token_is_max_context"].numpy().astype(int).tolist()
        [[0, 0, 0, 1, 1, 1, 0, 0], [0, 0, 0, 0, 0, 1, 1, 0]]
        """
        return self._windows(*self._inputs(x))[0]

    # === Packing ===

    def _inputs(self, x):
        if not isinstance(x, (tuple, list)) or len(x) != 2:
            raise ValueError(
                "BertQuestionAnswererPreprocessor takes x = (questions, contexts), two "
                f"equally long batches of strings; got {type(x).__name__} {x!r:.80}."
            )
        return [self._batch(strings, name) for strings, name in zip(x, ("questions", "contexts"))]

    @staticmethod
    def _batch(strings, name):
        strings = to_string_tensor(strings)
        if strings.shape.rank != 1:
            raise ValueError(f"{name} must be a 1-D batch of strings, got shape {strings.shape}.")
        return strings

    def _windows(self, questions, contexts):
        """The public `windows` dict, and the layout the labels need."""
        checks = _require(
            tf.equal(tf.size(questions), tf.size(contexts)),
            "questions and contexts must be batches of the same length",
        )
        with tf.control_dependencies(checks):
            questions = tf.identity(questions)
        tokenizer, stride = self.tokenizer, self.document_stride
        question_ids = tokenizer.tokenize(questions)
        question_ids = keep_first(question_ids, tf.fill([question_ids.nrows()], self.max_question_length))
        context_ids, byte_starts, byte_ends = tokenizer.tokenize_with_offsets(contexts)

        # run_squad.py's doc spans: every `stride` tokens until one reaches the end.
        question_length = question_ids.row_lengths()  # (batch,)
        context_length = context_ids.row_lengths()
        room = self.sequence_length - 3 - question_length
        num_windows = 1 + (tf.maximum(context_length - room, 0) + stride - 1) // stride
        example_index = tf.repeat(tf.range(tf.size(num_windows, out_type=tf.int64)), num_windows)
        window_start = tf.ragged.range(num_windows).flat_values * stride  # (windows,) in the context
        window_length = tf.minimum(
            tf.gather(room, example_index), tf.gather(context_length, example_index) - window_start
        )
        first_token = tf.gather(context_ids.row_starts(), example_index) + window_start  # flat index
        window_tokens = tf.ragged.range(first_token, first_token + window_length)
        window_ids = tf.gather(context_ids.flat_values, window_tokens)
        outputs = pack_segments(
            [tf.gather(question_ids, example_index), window_ids], tokenizer, self.sequence_length
        )

        # Per position (windows, sequence_length): the flat context token there,
        # or `num_tokens`, a sentinel whose offsets are -1.
        offset = tf.gather(question_length, example_index)[:, None] + 2  # [CLS] question [SEP]
        left = tf.range(self.sequence_length, dtype=tf.int64)[None, :] - offset  # tokens before it
        right = window_length[:, None] - 1 - left  # tokens after it
        in_window = (left >= 0) & (right >= 0)
        num_tokens = tf.size(context_ids.flat_values, out_type=tf.int64)
        token = tf.where(in_window, first_token[:, None] + left, num_tokens)

        def at_tokens(values):
            return tf.cast(tf.gather(tf.concat([values, [-1]], 0), token), tf.int32)

        # _check_is_max_context: score min(left, right) + 0.01 * window length,
        # as integers; the earliest window wins a tie.
        score = 100 * tf.minimum(left, right) + window_length[:, None]
        num_windows_total = tf.size(example_index, out_type=tf.int64)
        window_index = tf.range(num_windows_total)[:, None]
        key = tf.where(in_window, score * (num_windows_total + 1) - window_index, -1)
        best = tf.math.unsorted_segment_max(key, token, num_tokens + 1)
        outputs.update(
            example_index=tf.cast(example_index, tf.int32),
            token_start_offsets=at_tokens(_char_offsets(byte_starts, contexts).flat_values),
            token_end_offsets=at_tokens(_char_offsets(byte_ends, contexts).flat_values),
            token_is_max_context=in_window & tf.equal(key, tf.gather(best, token)),
        )
        layout = {
            "byte_starts": byte_starts, "byte_ends": byte_ends, "example_index": example_index,
            "window_start": window_start, "window_length": window_length, "offset": offset[:, 0],
        }
        return outputs, layout

    # === Labels ===

    def _labels(self, y, contexts, layout):
        """start/end positions per window (run_squad.py), from character-offset answers."""
        if not isinstance(y, (tuple, list)) or len(y) != 2:
            raise ValueError(
                "Labels must be y = (answer_starts, answer_texts): SQuAD's character offset "
                "of each answer in its context (-1 for no answer) and the answer text."
            )
        answer_starts = tf.cast(tf.convert_to_tensor(y[0]), tf.int64)
        answer_texts = self._batch(y[1], "answer_texts")
        sizes_match = tf.equal(tf.size(answer_starts), tf.size(contexts)) & tf.equal(
            tf.size(answer_texts), tf.size(contexts)
        )
        with tf.control_dependencies(
            _require(sizes_match, "answer_starts and answer_texts must have one entry per context")
        ):
            answer_starts = tf.identity(answer_starts)
        has_answer = answer_starts >= 0
        # Character offset -> byte offset: the byte length of the text before it.
        length = tf.maximum(answer_starts, 0)
        prefix = tf.strings.substr(contexts, tf.zeros_like(length), length, unit="UTF8_CHAR")
        byte_start = tf.cast(tf.strings.length(prefix), tf.int64)
        byte_end = byte_start + tf.cast(tf.strings.length(answer_texts), tf.int64)
        found = tf.strings.substr(contexts, byte_start, byte_end - byte_start)
        context_chars = tf.cast(tf.strings.length(contexts, unit="UTF8_CHAR"), tf.int64)
        checks = _require(
            (answer_starts >= -1) & (answer_starts <= context_chars),
            "answer_start lies beyond its context (it is a character offset into the "
            "context; -1 means no answer)",
        ) + _require(
            tf.where(has_answer, tf.not_equal(answer_texts, "") & tf.equal(found, answer_texts),
                     tf.equal(answer_texts, "")),
            "answer text does not match its context at answer_start (a character offset); "
            "a no-answer example has answer_start -1 and text ''",
        )
        # The answer's tokens: the first ending after its start, the last starting before its end.
        first = tf.reduce_sum(tf.cast(layout["byte_ends"] <= byte_start[:, None], tf.int64), 1)
        last = tf.reduce_sum(tf.cast(layout["byte_starts"] < byte_end[:, None], tf.int64), 1) - 1
        # ... as positions in each window, labelled when the window holds all of it.
        example_index, window_start = layout["example_index"], layout["window_start"]
        first = tf.gather(first, example_index) - window_start
        last = tf.gather(last, example_index) - window_start
        inside = (
            tf.gather(has_answer, example_index)
            & (first >= 0) & (first <= last) & (last < layout["window_length"])
        )
        with tf.control_dependencies(checks):
            return {
                "start_positions": tf.cast(tf.where(inside, first + layout["offset"], 0), tf.int32),
                "end_positions": tf.cast(tf.where(inside, last + layout["offset"], 0), tf.int32),
            }
