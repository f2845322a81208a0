"""Special tokens written in the text (`[CLS]`, `[SEP]`, `[MASK]`, `[PAD]`,
`[UNK]`) read as those tokens, as Hugging Face's BERT tokenizers do by
default: the raw text is cut at each literal special token (case as
written, anywhere, even inside a word), the special token becomes its id, and
the text between is tokenized as usual (BERT sec. 3). This is what typing
"The capital of France is [MASK]." for a masked LM needs (sec. 3.1).

Off by default in kzoo (`special_tokens_in_strings=False`): text from users
is data, and a review that contains "[SEP]" should not end a segment.
"""

import re

import tensorflow as tf
import tensorflow_text as tf_text


def tokenize_with_special_tokens(strings, special_ids, tokenize_plain, with_offsets=False):
    """Token ids (and byte offsets) of `strings` with the special tokens in them read as tokens.

    Args:
        strings: 1-D `tf.string` tensor. The texts.
        special_ids: dict of str to int. Each special token and its id.
        tokenize_plain: callable. Ordinary tokenization of a 1-D `tf.string`
            tensor: ragged `(n, None)` ids, or `(ids, starts, ends)` with
            `with_offsets`.
        with_offsets: bool. Also return each token's byte span in its string.
            Defaults to `False`.

    Returns:
        Ragged int32 ids `(batch, None)`; with `with_offsets`, also ragged
        int64 start and end byte offsets.

    Example:

    >>> import tensorflow as tf
    >>> from kzoo import BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "paris", "is", "."])
    >>> texts = tf.constant(["Paris is[MASK]."])
    >>> tokenize_with_special_tokens(texts, {"[MASK]": 4}, tokenizer._token_ids).to_list()
    [[5, 6, 4, 7]]
    """
    # Longest first, so that a token containing another wins (RE2 takes the first alternative).
    pattern = "|".join(re.escape(token) for token in sorted(special_ids, key=len, reverse=True))
    segments, segment_starts, segment_ends = tf_text.regex_split_with_offsets(strings, pattern, pattern)
    flat = segments.flat_values
    special = tf.fill(tf.shape(flat), -1)
    for token, token_id in special_ids.items():
        special = tf.where(tf.equal(flat, token), token_id, special)
    is_special = special >= 0
    plain = tokenize_plain(flat)
    ids = plain[0] if with_offsets else plain

    def per_segment(special_values, plain_values):
        """Each segment's tokens: its special id alone, or its ordinary tokens."""
        specials = tf.RaggedTensor.from_row_lengths(
            tf.boolean_mask(special_values, is_special), tf.cast(is_special, ids.row_splits.dtype)
        )
        keep = tf.gather(tf.logical_not(is_special), plain_values.value_rowids())
        kept = tf.ragged.boolean_mask(plain_values, plain_values.with_flat_values(keep))
        joined = tf.concat([tf.cast(specials, plain_values.dtype), kept], axis=1)
        return segments.with_flat_values(joined).merge_dims(1, 2)

    merged_ids = per_segment(special, ids)
    if not with_offsets:
        return merged_ids
    segment_start, segment_end = segment_starts.flat_values, segment_ends.flat_values
    _, starts, ends = plain
    shift = tf.gather(segment_start, starts.value_rowids())  # offsets were relative to the segment
    return (
        merged_ids,
        per_segment(segment_start, starts.with_flat_values(starts.flat_values + shift)),
        per_segment(segment_end, ends.with_flat_values(ends.flat_values + shift)),
    )
