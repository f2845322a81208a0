"""Batching by approximate length to a token budget ("Attention Is All You Need", sec. 5.1).

"Sentence pairs were batched together by approximate sequence length. Each
training batch contained a set of sentence pairs containing approximately
25000 source tokens and 25000 target tokens." As in tensor2tensor, examples
go to buckets by length (boundaries growing geometrically by 10%), and each
bucket's batch size is the token budget divided by the bucket's longest
allowed length, so every padded batch stays within the budget however long
its sequences are.
"""

import tensorflow as tf


def length_boundaries(max_length, min_length=8, step=1.1):
    """Bucket boundaries growing by a factor `step` up to `max_length` (sec. 5.1).

    tensor2tensor's `_bucket_boundaries`: `min_length`, then each boundary
    `max(b + 1, int(b · step))`, ending with `max_length` itself. A bucket
    holds the lengths above the previous boundary up to its own, so within a
    bucket lengths differ by at most ~10% and batches carry little padding.

    Args:
        max_length: int. The longest example length allowed (the last boundary).
        min_length: int. The first boundary (lengths up to it share one
            bucket). Defaults to `8`.
        step: float. The growth factor between boundaries (> 1). Defaults to `1.1`.

    Returns:
        A list of increasing ints ending with `max_length`.

    Example:

    >>> length_boundaries(30)
    [8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 22, 24, 26, 28, 30]
    >>> length_boundaries(100, min_length=10, step=1.5)
    [10, 15, 22, 33, 49, 73, 100]
    """
    if max_length < 1 or min_length < 1 or step <= 1.0:
        raise ValueError(
            f"length_boundaries needs max_length >= 1, min_length >= 1 and step > 1; got "
            f"max_length={max_length}, min_length={min_length}, step={step}."
        )
    boundaries = []
    boundary = min(min_length, max_length)
    while boundary < max_length:
        boundaries.append(boundary)
        boundary = max(boundary + 1, int(boundary * step))
    return boundaries + [max_length]


def _check_element_spec(element_spec):
    specs = tf.nest.flatten(element_spec)
    bad = [
        spec
        for spec in specs
        if not isinstance(spec, tf.TensorSpec) or spec.shape.rank != 1 or not spec.dtype.is_integer
    ]
    if bad or not specs:
        raise ValueError(
            "batch_by_length expects a dataset of unbatched examples whose tensors are all "
            "1-D integer token ids, e.g. ({'encoder_token_ids': ..., 'decoder_token_ids': ...}, "
            f"target_ids); got element_spec {element_spec}. Call it before `.batch()`, and keep "
            "scalars and strings out of the examples (tokenize first)."
        )


def _check_boundaries(boundaries, tokens_per_batch):
    if not boundaries or any(b < 1 for b in boundaries) or sorted(set(boundaries)) != list(boundaries):
        raise ValueError(
            f"boundaries={boundaries} must be strictly increasing positive lengths, the last one "
            "the longest example allowed; e.g. kzoo.data.length_boundaries(max_length)."
        )
    if boundaries[-1] > tokens_per_batch:
        raise ValueError(
            f"The longest allowed example ({boundaries[-1]} tokens, the last boundary) does not "
            f"fit in tokens_per_batch={tokens_per_batch}: raise tokens_per_batch or lower "
            "max_length / the last boundary."
        )


def batch_by_length(
    dataset,
    tokens_per_batch=25000,
    boundaries=None,
    padding_id=0,
    drop_remainder=False,
    max_length=None,
):
    """Batches examples of similar length so each batch holds about `tokens_per_batch` tokens (sec. 5.1).

    An example's length is the longest of its token-id tensors (source or
    target). Bucket `i` holds the examples with
    `boundaries[i - 1] < length <= boundaries[i]` and batches them
    `tokens_per_batch // boundaries[i]` at a time, padded with `padding_id`
    to the longest in the batch: every batch then has at most
    `tokens_per_batch` tokens per tensor (source and target, each: the paper's
    "approximately 25000 source tokens and 25000 target tokens"). A full
    batch has at least `(boundaries[i - 1] + 1) · (tokens_per_batch //
    boundaries[i])` tokens per tensor, ~90% of the budget with the default
    10% steps. Built on `tf.data.Dataset.bucket_by_sequence_length`. Shuffle
    the examples first (and shuffle the batches after, if you like): buckets
    fill in arrival order. At the end of the data, partly filled buckets
    come out as smaller batches unless `drop_remainder=True`.

    An example longer than the last boundary stops the iteration with a
    `tf.errors.InvalidArgumentError` saying so (lengths are known only when
    the data flows; filter long examples out first, or raise `max_length`).

    Args:
        dataset: `tf.data.Dataset`. Unbatched examples: a dict of 1-D
            integer tensors (e.g. `encoder_token_ids`, `decoder_token_ids`),
            or a tuple `(dict, target_ids)`; any nest of 1-D integer tensors.
        tokens_per_batch: int. The token budget per batch and per tensor.
            Defaults to `25000`.
        boundaries: list of int or None. Increasing bucket boundaries
            (inclusive maximum lengths), the last being the longest example
            allowed. Defaults to `None`: `length_boundaries(max_length)`.
        padding_id: int. The id that pads sequences. Defaults to `0`.
        drop_remainder: bool. Whether to drop the last, partly filled batch
            of every bucket. Defaults to `False`.
        max_length: int or None. The longest example allowed when
            `boundaries` is `None`. Defaults to `None`: up to
            `tokens_per_batch` (a batch of one).

    Returns:
        A `tf.data.Dataset` of padded batches with the examples' structure.

    Example:

    >>> import tensorflow as tf
    >>> lengths = [3, 9, 4, 10, 2, 8]
    >>> examples = tf.data.Dataset.from_tensor_slices(tf.ragged.constant(
    ...     [[n] * n for n in lengths])).map(lambda ids: {"token_ids": ids})
    >>> for batch in batch_by_length(examples, tokens_per_batch=20, boundaries=[5, 10]):
    ...     print(tuple(batch["token_ids"].shape), batch["token_ids"][:, 0].numpy().tolist())
    (2, 10) [9, 10]
    (3, 4) [3, 4, 2]
    (1, 8) [8]
    """
    _check_element_spec(dataset.element_spec)
    if boundaries is None:
        boundaries = length_boundaries(max_length or tokens_per_batch)
    boundaries = [int(b) for b in boundaries]
    _check_boundaries(boundaries, tokens_per_batch)
    longest = boundaries[-1]

    def length(*example):
        return tf.reduce_max([tf.shape(ids)[0] for ids in tf.nest.flatten(example)])

    def check_length(*example):
        tf.debugging.assert_less_equal(
            length(*example),
            longest,
            message=f"batch_by_length: an example is longer than the last boundary ({longest} "
            "tokens). Filter long examples out first, or raise max_length / the last boundary "
            "(at most tokens_per_batch).",
        )
        return example if len(example) > 1 else example[0]

    spec = dataset.element_spec
    return dataset.map(check_length).bucket_by_sequence_length(
        element_length_func=length,
        # tf.data's boundaries are exclusive upper limits: lengths <= b go below b + 1.
        bucket_boundaries=[b + 1 for b in boundaries[:-1]],
        bucket_batch_sizes=[tokens_per_batch // b for b in boundaries],
        padded_shapes=tf.nest.map_structure(lambda s: tf.TensorShape([None]), spec),
        padding_values=tf.nest.map_structure(lambda s: tf.constant(padding_id, s.dtype), spec),
        drop_remainder=drop_remainder,
    )
