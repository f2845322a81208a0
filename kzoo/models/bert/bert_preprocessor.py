"""Packing one or two text segments into BERT's fixed-length inputs (BERT sec. 3, Figure 2).

Runs in TensorFlow (tensorflow-text) for every Keras backend: inside `tf.data`
or eagerly, its outputs feed `kzoo.BertBackbone` on TensorFlow, JAX or PyTorch.
"""

import keras
import tensorflow as tf

from kzoo.data.packing import keep_first, longest_first_budgets, pack_segments
from kzoo.models.bert.bert_tokenizer import BertTokenizer
from kzoo.models.input_checks import check_int
from kzoo.models.preprocessor import Preprocessor


@keras.saving.register_keras_serializable(package="kzoo")
class BertPreprocessor(Preprocessor):
    """Tokenizes and packs text into `{token_ids, segment_ids, padding_mask}` (BERT sec. 3).

    One segment becomes `[CLS] A [SEP]`, a pair `[CLS] A [SEP] B [SEP]`;
    segment ids are 0 for `[CLS]`, A and its `[SEP]`, and 1 for B and its
    `[SEP]`; the rest is padded with `[PAD]` up to `sequence_length` (padding
    mask 0). Pairs that do not fit are truncated longest-first, with the same
    result as Hugging Face's `truncation="longest_first"`.

    Args:
        tokenizer: `kzoo.BertTokenizer`. The WordPiece tokenizer.
        sequence_length: int. The fixed output length (128 for most of BERT's
            pre-training steps, 512 at most). Defaults to `512`.
        padding: str. `"longest"`: each batch padded only to the ladder length
            (`kzoo.data.length_ladder`) at or above its longest text;
            `"max_length"`: to `sequence_length`. Defaults to `"longest"`.

    Call arguments:
        x: str, list of str or tuple. A batch of strings (list, NumPy array
            or `tf.string` tensor), a single string, or a tuple `(texts_a,
            texts_b)` of two equally long batches for sentence pairs. A tuple
            always means two segments.
        y: tensor or None. Labels, passed through, so `dataset.map(preprocessor)`
            works on `(x, y)` datasets. Defaults to `None`.
        sample_weight: tensor or None. Weights, passed through. Defaults to `None`.

    Returns:
        A dict of int32 `tf.Tensor`s `(batch, sequence_length)` (or
        `(sequence_length,)` for a single string), or `(dict, y[, sample_weight])`.

    Example:

    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat"]
    >>> preprocessor = BertPreprocessor(BertTokenizer(vocabulary), sequence_length=8)
    >>> out = preprocessor(["The cat sat", "on the mat"])
    >>> out["token_ids"].numpy().tolist()[0]
    [2, 5, 6, 7, 3, 0, 0, 0]
    >>> out = preprocessor((["the cat"], ["sat on the mat"]))
    >>> out["token_ids"].numpy().tolist(), out["segment_ids"].numpy().tolist()
    ([[2, 5, 6, 3, 7, 8, 5, 3]], [[0, 0, 0, 0, 1, 1, 1, 1]])
    """

    tokenizer_class = BertTokenizer
    # Texts-alone calls run eagerly this many times before one trace: a trace
    # (~1 s of CPU) pays back after ~30 eager calls (~30 ms each), so a
    # one-off `predict` never pays it and a stream of small ones pays it once.
    eager_text_calls = 32

    def __init__(self, tokenizer, sequence_length=512, padding="longest"):
        super().__init__(tokenizer, padding)
        self.sequence_length = pair_length(sequence_length)
        self._text_calls = 0

    def _traces_texts(self):
        self._text_calls += 1
        return self._text_calls > self.eager_text_calls

    def call(self, x, y=None, sample_weight=None):
        segments = x if isinstance(x, tuple) else (x,)
        if len(segments) not in (1, 2):
            raise ValueError(
                f"BertPreprocessor packs one segment or a pair; got a tuple of {len(segments)}."
            )
        packed = truncate_and_pack(list(map(self.tokenizer.tokenize, segments)), self.tokenizer, self.sequence_length)
        return keras.utils.pack_x_y_sample_weight(packed, y, sample_weight)


def pair_length(sequence_length, owner="BertPreprocessor", minimum=3):
    """`sequence_length`, or a `ValueError` when it is not an int or leaves
    no room for text (BERT sec. 3: `[CLS] A [SEP]` needs 3 positions,
    `[CLS] A [SEP] B [SEP]` 5).

    Args:
        sequence_length: int. The packed length.
        owner: str. The preprocessor's name, for the message. Defaults to `"BertPreprocessor"`.
        minimum: int. 3 for single texts (and pairs, checked when packed), 5 for pairs only.

    Example:

    >>> pair_length(8)
    8
    >>> pair_length(2)
    Traceback (most recent call last):
    ...
    ValueError: BertPreprocessor: sequence_length=2 leaves no room for text: [CLS] A [SEP] needs 3 positions ...
    """
    check_int(sequence_length, "sequence_length", owner)
    if sequence_length < minimum:
        raise ValueError(
            f"{owner}: sequence_length={sequence_length} leaves no room for text: [CLS] A [SEP] "
            "needs 3 positions and a pair [CLS] A [SEP] B [SEP] 5 (one token each); use 8 or more."
        )
    return int(sequence_length)


def truncate_and_pack(segments, tokenizer, sequence_length):
    """One or two segments of ids (ragged `(batch, None)`, or 1-D for a single
    text) cut to fit in `sequence_length` tokens with `[CLS]` and a `[SEP]`
    each (pairs longest-first), then packed by `pack_segments` (BERT sec. 3, Figure 2).

    Args:
        segments: a list of one or two id tensors.
        tokenizer: a `kzoo.BertTokenizer`, for the special tokens' ids.
        sequence_length: int. The packed length.

    Returns:
        A dict of int32 `token_ids`, `segment_ids` and `padding_mask`,
        `(batch, sequence_length)` (or `(sequence_length,)` for a single text).

    Example:

    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"])
    >>> packed = truncate_and_pack([tf.ragged.constant([[5, 5, 5]]), tf.ragged.constant([[6]])], tokenizer, 6)
    >>> packed["token_ids"].numpy().tolist()
    [[2, 5, 5, 3, 6, 3]]
    """
    if len(segments) == 2:
        segments = _same_rows(*segments)
        pair_length(sequence_length, minimum=5)
    scalar = segments[0].shape.rank == 1  # a single string gives a 1-D tensor of ids
    if scalar:
        segments = [tf.RaggedTensor.from_tensor(tf.expand_dims(s, 0)) for s in segments]
    budget = sequence_length - 1 - len(segments)  # [CLS] and one [SEP] each
    if len(segments) == 1:
        segments = [keep_first(segments[0], tf.fill([segments[0].nrows()], budget))]
    else:
        keep_a, keep_b = longest_first_budgets(segments[0].row_lengths(), segments[1].row_lengths(), budget)
        segments = [keep_first(segments[0], keep_a), keep_first(segments[1], keep_b)]
    outputs = pack_segments(segments, tokenizer, sequence_length)
    return {k: v[0] for k, v in outputs.items()} if scalar else outputs


def _same_rows(first, second):
    """The two segments, or an error when they hold different numbers of
    texts (known now in eager calls; a `tf.data` assertion otherwise)."""
    message = "The two columns of text pairs (texts_a, texts_b) have different lengths"
    if first.shape.rank != second.shape.rank:
        raise ValueError(f"{message}: give both as single strings or both as batches.")
    if first.shape.rank == 1:  # two single strings: ids of one text each
        return first, second
    rows = [s.shape[0] for s in (first, second)]
    if None not in rows:
        if rows[0] != rows[1]:
            raise ValueError(f"{message}: {rows[0]} and {rows[1]}. Each pair needs one text in each column.")
        return first, second
    check = tf.debugging.assert_equal(first.nrows(), second.nrows(), message=message)
    with tf.control_dependencies([check]):
        return tf.identity(first), second
