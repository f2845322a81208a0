"""Packing one or two text segments into BERT's fixed-length inputs (BERT sec. 3, Figure 2).

Runs in TensorFlow (tensorflow-text) for every Keras backend: inside `tf.data`
or eagerly, its outputs feed `kzoo.BertBackbone` on TensorFlow, JAX or PyTorch.
"""

import keras
import tensorflow as tf

from kzoo.data.packing import keep_first, longest_first_budgets, pack_segments
from kzoo.models.bert.bert_tokenizer import BertTokenizer
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

    def __init__(self, tokenizer, sequence_length=512):
        super().__init__(tokenizer)
        self.sequence_length = pair_length(sequence_length)

    def call(self, x, y=None, sample_weight=None):
        segments = x if isinstance(x, tuple) else (x,)
        if len(segments) not in (1, 2):
            raise ValueError(
                f"BertPreprocessor packs one segment or a pair; got a tuple of {len(segments)}."
            )
        packed = truncate_and_pack([self.tokenizer.tokenize(s) for s in segments], self.tokenizer, self.sequence_length)
        return keras.utils.pack_x_y_sample_weight(packed, y, sample_weight)


def pair_length(sequence_length):
    """`sequence_length` as an int, or a `ValueError` when it leaves no room
    for a pair of segments (BERT sec. 3: `[CLS] A [SEP] B [SEP]`).

    Example:

    >>> pair_length(8.0)
    8
    """
    if sequence_length < 3:
        raise ValueError(
            f"sequence_length={sequence_length} leaves no room for text: a pair "
            "needs [CLS], two [SEP] and at least one token each; use 8 or more."
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
