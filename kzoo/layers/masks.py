"""Attention masks: padding masks, causal masks and a dtype-safe "minus infinity".

Eq. 1 of "Attention Is All You Need" (sec. 3.2.1) computes
`softmax(Q K^T / sqrt(d_k)) V`; sec. 3.2.3 masks illegal connections "by setting
to -inf all values in the input of the softmax". All masks here are boolean,
shaped `(batch, query_length, key_length)` (or broadcastable to it), and `True`
means "may attend".
"""

from keras import ops


def large_negative_number(dtype):
    """The value kzoo adds for masked-out attention logits, finite in `dtype`.

    A literal `-1e9` overflows to `-inf` in float16, and `-inf` rows turn into
    NaN once a whole row is masked. This returns `-3e4` for float16 (as Keras'
    own softmax does) and `-1e9` otherwise (BERT used -10000; any value far
    below real logits gives the same probabilities).

    Args:
        dtype: str or dtype. The dtype of the attention logits.

    Returns:
        float. `-3e4` or `-1e9`.

    Example:

    >>> large_negative_number("float16")
    -30000.0
    >>> large_negative_number("float32")
    -1000000000.0
    """
    return -3e4 if "float16" in str(dtype) else -1e9


def padding_attention_mask(padding_mask):
    """Turns a `(batch, key_length)` padding mask into an attention mask.

    Args:
        padding_mask: tensor of shape `(batch, key_length)`. Non-zero /
            `True` marks real tokens.

    Returns:
        Boolean `(batch, 1, key_length)`, broadcastable against any query length.

    Example:

    >>> import numpy as np
    >>> m = padding_attention_mask(np.array([[1, 1, 0]]))
    >>> ops.convert_to_numpy(m).tolist()
    [[[True, True, False]]]
    """
    return ops.expand_dims(ops.cast(padding_mask, "bool"), axis=1)


def causal_attention_mask(query_length, key_length, query_offset=0):
    """The decoder's causal mask (sec. 3.2.3): position i sees keys 0..i only.

    Args:
        query_length: int. The number of query positions.
        key_length: int. The number of key positions.
        query_offset: int or scalar tensor. The absolute position of the
            first query, for incremental decoding with a key/value cache.
            Defaults to `0`.

    Returns:
        Boolean `(1, query_length, key_length)`.

    Example:

    >>> m = causal_attention_mask(3, 3)
    >>> ops.convert_to_numpy(m).astype(int).tolist()
    [[[1, 0, 0], [1, 1, 0], [1, 1, 1]]]
    """
    query_positions = ops.arange(query_length) + query_offset
    key_positions = ops.arange(key_length)
    mask = ops.expand_dims(query_positions, 1) >= ops.expand_dims(key_positions, 0)
    return ops.expand_dims(mask, 0)


def merge_attention_masks(*masks):
    """Logical AND of any number of boolean masks; `None` entries are skipped.

    Args:
        *masks: bool tensors or None. Masks broadcastable to one shape.

    Returns:
        A bool tensor, or `None` when every mask is `None`.

    Example:

    >>> import numpy as np
    >>> m = merge_attention_masks(causal_attention_mask(2, 2), None,
    ...                           padding_attention_mask(np.array([[1, 0]])))
    >>> ops.convert_to_numpy(m).astype(int).tolist()
    [[[1, 0], [1, 0]]]
    """
    merged = None
    for mask in masks:
        if mask is None:
            continue
        mask = ops.cast(mask, "bool")
        merged = mask if merged is None else ops.logical_and(merged, mask)
    return merged
