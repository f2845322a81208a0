"""Packing token ids into BERT's fixed-length inputs (BERT sec. 3, Figure 2):
`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, padded, with segment ids and a
padding mask; and the truncation that makes two segments fit.

The one home of these ops for the pre-training pipeline
(`kzoo.data.pretraining_dataset`) and for the models' preprocessors
(`kzoo.BertPreprocessor` and the fine-tuning tasks' preprocessors).
"""

import tensorflow as tf
import tensorflow_text as tf_text


def longest_first_budgets(length_a, length_b, budget):
    """Per-example lengths to keep of two segments so that they fit in
    `budget` tokens (BERT sec. 3's sentence pairs, truncated as Hugging Face).

    The rule of Hugging Face's `truncation="longest_first"` (and of the original
    BERT's `_truncate_seq_pair`, which removes tokens from the longer segment one
    at a time): the shorter segment keeps `min(its length, budget // 2)` or more,
    the longer one takes the rest; when both must be cut, the budget splits in
    halves and an odd token goes to the longer segment (the second on a tie).

    Args:
        length_a: int tensor `(batch,)`. The lengths of the first segments.
        length_b: int tensor `(batch,)`. The lengths of the second segments.
        budget: int. The tokens available to both segments together.

    Returns:
        `(keep_a, keep_b)`, int32 tensors `(batch,)`.

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
    """The first `lengths[i]` items of each row of a ragged tensor (a
    segment truncated to its share of BERT sec. 3's sequence length).

    Args:
        ragged: `tf.RaggedTensor` of shape `(batch, None)`. The rows to cut.
        lengths: int tensor `(batch,)`. How many items each row keeps.

    Returns:
        A `tf.RaggedTensor` `(batch, None)`.

    Example:

    >>> keep_first(tf.ragged.constant([[1, 2, 3], [4]]), tf.constant([2, 2])).to_list()
    [[1, 2], [4]]
    """
    positions = tf.ragged.range(ragged.row_lengths(), dtype=tf.int64)
    keep = positions < tf.expand_dims(tf.cast(lengths, tf.int64), 1)
    return tf.ragged.boolean_mask(ragged, keep)


def pack_segments(segments, tokenizer, sequence_length):
    """`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, padded to `sequence_length`
    (BERT sec. 3, Figure 2), from one or two id spans that already fit.

    Args:
        segments: list of `tf.RaggedTensor`. One or two `(batch, None)`
            tensors of token ids, short enough to fit with the special tokens.
        tokenizer: `kzoo.BertTokenizer`. The tokenizer, or any object with
            `cls_token_id`, `sep_token_id` and `pad_token_id`.
        sequence_length: int. The packed length, special tokens included.

    Returns:
        A dict of int32 tensors `(batch, sequence_length)`: `token_ids`,
        `segment_ids` (0 for `[CLS]`, A and its `[SEP]`, 1 for B and its
        `[SEP]`) and `padding_mask` (1 on tokens, 0 on padding).

    Example:

    >>> from kzoo import BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"])
    >>> segments = [tf.ragged.constant([[5, 5]]), tf.ragged.constant([[6]])]
    >>> out = pack_segments(segments, tokenizer, 7)
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
