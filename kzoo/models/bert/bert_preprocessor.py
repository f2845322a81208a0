"""Packing one or two text segments into BERT's fixed-length inputs (BERT sec. 3, Figure 2).

Runs in TensorFlow (tensorflow-text) for every Keras backend: inside `tf.data`
or eagerly, its outputs feed `kzoo.BertBackbone` on TensorFlow, JAX or PyTorch.
"""

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from kzoo.preprocessor_parts import PreprocessorWithTokenizer
from kzoo.models.bert.bert_tokenizer import BertTokenizer


def longest_first_budgets(length_a, length_b, budget):
    """Per-example lengths to keep of two segments so that they fit in `budget` tokens.

    The rule of Hugging Face's `truncation="longest_first"` (and of the original
    BERT's `_truncate_seq_pair`, which removes tokens from the longer segment one
    at a time): the shorter segment keeps `min(its length, budget // 2)` or more,
    the longer one takes the rest; when both must be cut, the budget splits in
    halves and an odd token goes to the longer segment (the second on a tie).

    Args:
        length_a: int tensor `(batch,)`, lengths of the first segments.
        length_b: int tensor `(batch,)`, lengths of the second segments.
        budget: int, tokens available to both segments together.

    Returns:
        `(keep_a, keep_b)`, int tensors `(batch,)`.

    Example:

    >>> a, b = longest_first_budgets(tf.constant([10, 3, 6]), tf.constant([10, 20, 6]), 9)
    >>> a.numpy().tolist(), b.numpy().tolist()
    ([4, 3, 4], [5, 6, 5])
    """
    length_a = tf.cast(length_a, tf.int32)
    length_b = tf.cast(length_b, tf.int32)
    shorter = tf.minimum(length_a, length_b)
    longer = tf.maximum(length_a, length_b)
    # The shorter segment keeps all it has; the longer one takes what is left,
    # but no less than the shorter one keeps.
    limit_short = shorter
    limit_long = tf.where(shorter > budget, shorter, tf.maximum(shorter, budget - shorter))
    # Still too long together: split the budget in halves.
    both_cut = limit_short + limit_long > budget
    limit_short = tf.where(both_cut, budget // 2, limit_short)
    limit_long = tf.where(both_cut, budget // 2 + budget % 2, limit_long)
    keep_short = tf.minimum(shorter, limit_short)
    keep_long = tf.minimum(longer, limit_long)
    # Segments that fit together are kept whole.
    fits = length_a + length_b <= budget
    first_is_longer = length_a > length_b
    keep_a = tf.where(fits, length_a, tf.where(first_is_longer, keep_long, keep_short))
    keep_b = tf.where(fits, length_b, tf.where(first_is_longer, keep_short, keep_long))
    return keep_a, keep_b


def keep_first(ragged, lengths):
    """The first `lengths[i]` items of each row of a ragged tensor."""
    positions = tf.ragged.range(ragged.row_lengths(), dtype=tf.int64)
    keep = positions < tf.expand_dims(tf.cast(lengths, tf.int64), 1)
    return tf.ragged.boolean_mask(ragged, keep)


def pack_segments(segments, tokenizer, sequence_length):
    """`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, padded to `sequence_length`,
    from a list of one or two ragged `(batch, None)` id spans that already fit
    (BERT sec. 3, Figure 2).

    Returns `token_ids`, `segment_ids` and `padding_mask`, each `(batch, sequence_length)` int32.

    >>> import tensorflow as tf
    >>> tok = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"])
    >>> out = pack_segments([tf.ragged.constant([[5, 5]]), tf.ragged.constant([[6]])], tok, 7)
    >>> out["token_ids"].numpy().tolist(), out["segment_ids"].numpy().tolist()
    ([[2, 5, 5, 3, 6, 3, 0]], [[0, 0, 0, 0, 1, 1, 0]])
    """
    token_ids, segment_ids = tf_text.combine_segments(
        segments,
        start_of_sequence_id=tokenizer.cls_token_id,
        end_of_segment_id=tokenizer.sep_token_id,
    )
    token_ids, padding_mask = tf_text.pad_model_inputs(
        token_ids, sequence_length, pad_value=tokenizer.pad_token_id
    )
    segment_ids, _ = tf_text.pad_model_inputs(segment_ids, sequence_length)
    return {
        "token_ids": tf.cast(token_ids, tf.int32),
        "segment_ids": tf.cast(segment_ids, tf.int32),
        "padding_mask": tf.cast(padding_mask, tf.int32),
    }


@keras.saving.register_keras_serializable(package="kzoo")
class BertPreprocessor(PreprocessorWithTokenizer):
    """Tokenizes and packs text into `{token_ids, segment_ids, padding_mask}` (BERT sec. 3).

    One segment becomes `[CLS] A [SEP]`, a pair `[CLS] A [SEP] B [SEP]`;
    segment ids are 0 for `[CLS]`, A and its `[SEP]`, and 1 for B and its
    `[SEP]`; the rest is padded with `[PAD]` up to `sequence_length` (padding
    mask 0). Pairs that do not fit are truncated longest-first, with the same
    result as Hugging Face's `truncation="longest_first"`.

    Args:
        tokenizer: a `kzoo.BertTokenizer`.
        sequence_length: the fixed output length (128 for most of BERT's
            pre-training steps, 512 at most).

    Call arguments:
        x: a batch of strings (list, numpy array or `tf.string` tensor), a
            single string, or a tuple `(texts_a, texts_b)` of two equally long
            batches for sentence pairs. A tuple always means two segments.
        y, sample_weight: passed through, so `dataset.map(preprocessor)` works on
            `(x, y)` datasets.

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

    def __init__(self, tokenizer, sequence_length=512):
        if sequence_length < 3:
            raise ValueError(
                f"sequence_length={sequence_length} leaves no room for text: a pair "
                "needs [CLS], two [SEP] and at least one token each; use 8 or more."
            )
        self.tokenizer = tokenizer
        self.sequence_length = int(sequence_length)

    @tf.autograph.experimental.do_not_convert  # graph-ready TF ops: nothing to convert
    def __call__(self, x, y=None, sample_weight=None):
        segments = x if isinstance(x, tuple) else (x,)
        if len(segments) not in (1, 2):
            raise ValueError(
                f"BertPreprocessor packs one segment or a pair; got a tuple of {len(segments)}."
            )
        packed = self._pack([self.tokenizer.tokenize(s) for s in segments])
        return keras.utils.pack_x_y_sample_weight(packed, y, sample_weight)

    def _pack(self, segments):
        scalar = segments[0].shape.rank == 1  # a single string gives a 1-D tensor of ids
        if scalar:
            segments = [tf.RaggedTensor.from_tensor(tf.expand_dims(s, 0)) for s in segments]
        budget = self.sequence_length - 1 - len(segments)  # [CLS] and one [SEP] each
        if len(segments) == 1:
            segments = [keep_first(segments[0], tf.fill([segments[0].nrows()], budget))]
        else:
            keep_a, keep_b = longest_first_budgets(
                segments[0].row_lengths(), segments[1].row_lengths(), budget
            )
            segments = [keep_first(segments[0], keep_a), keep_first(segments[1], keep_b)]
        outputs = pack_segments(segments, self.tokenizer, self.sequence_length)
        return {k: v[0] for k, v in outputs.items()} if scalar else outputs
