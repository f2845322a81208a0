"""Padding each batch only as far as its longest text needs, to a rung of a short ladder of lengths.

BERT packs every text to one `sequence_length` (sec. 3; google-research's
`max_seq_length`), so a 12-token message costs 128 positions of attention and
feed-forward. Real text is mostly short; here each batch is padded to the
smallest rung of a fixed ladder at or above its longest text (as Hugging Face's
`padding="longest"` with `pad_to_multiple_of`), and examples are grouped by
length before they are batched (Hugging Face's `group_by_length`, tf.data's
`bucket_by_sequence_length`). The ladder bounds the shapes a compiled step
sees, so XLA and `jax.jit` compile each at most once. Outputs at the real
positions are those of fixed padding: padding is trailing and masked out of
attention (sec. 3), so cutting it off changes nothing before it.

Works on NumPy arrays and TensorFlow tensors alike (the in-memory batches and
the `tf.data` / SavedModel paths).
"""

import bisect

import numpy as np
import tensorflow as tf

SEQUENCE_KEYS = ("token_ids", "segment_ids", "padding_mask")  # BERT's packed inputs, sequence last
PADDING_MODES = ("longest", "max_length")


def length_ladder(max_length, unit=16, compiled=True):
    """The rungs: `unit` times 1, 2, 4, 8, then 12, 16, 24, 32, ... below
    `max_length`, then `max_length` itself. Up to `8 · unit` (128) a step is
    cheap next to an XLA compile (seconds), so the rungs double: few shapes
    to compile; above it steps cost more than padding saves, so each rung is
    at most 1.5x the one below (at most a third of a batch's positions pad
    beyond its longest text). 4 rungs up to 128, 8 up to 512.

    A model that does not compile a step per shape (torch, TensorFlow
    without XLA) takes `compiled=False`: every multiple of 8, so each batch
    pads only to the multiple of 8 at or above its longest text (Hugging
    Face's `padding="longest"` with `pad_to_multiple_of=8`).

    Args:
        max_length: int. The longest packed length (the preprocessor's `sequence_length`).
        unit: int. The first rung. Defaults to `16`.
        compiled: bool. Whether each shape costs a compile. Defaults to `True`.

    Returns:
        A list of increasing ints ending with `max_length`.

    Example:

    >>> length_ladder(128)
    [16, 32, 64, 128]
    >>> length_ladder(40, compiled=False)
    [8, 16, 24, 32, 40]
    >>> length_ladder(512)
    [16, 32, 64, 128, 192, 256, 384, 512]
    >>> length_ladder(40), length_ladder(8)
    ([16, 32, 40], [8])
    """
    if not compiled:
        return list(range(8, max_length, 8)) + [int(max_length)]
    rungs = [unit, 2 * unit, 4 * unit]
    power = 8 * unit
    while power < max_length:
        rungs += [power, power * 3 // 2]
        power *= 2
    return rungs[: bisect.bisect_left(rungs, max_length)] + [int(max_length)]  # rungs increase


def ladder_length(longest, max_length, padding="longest", ladder=None):
    """The length a batch whose longest text has `longest` tokens is padded
    to: the smallest rung of `ladder` at or above it, or `max_length` with
    `padding="max_length"`.

    Args:
        longest: int or scalar int tensor. The batch's longest text, in tokens.
        max_length: int. The packed length.
        padding: str. `"longest"` or `"max_length"`. Defaults to `"longest"`.
        ladder: list of int or None. Defaults to `None`: `length_ladder(max_length)`.

    Example:

    >>> ladder_length(12, 128), ladder_length(33, 128), ladder_length(0, 128), ladder_length(5, 128, "max_length")
    (16, 64, 16, 128)
    """
    if padding == "max_length":
        return max_length
    ladder = length_ladder(max_length) if ladder is None else ladder
    if isinstance(longest, tf.Tensor):
        index = tf.searchsorted(tf.constant(ladder, longest.dtype), tf.reshape(longest, [1]), side="left")[0]
        return tf.gather(tf.constant(ladder, tf.int32), tf.minimum(index, len(ladder) - 1))
    return ladder[min(int(np.searchsorted(ladder, longest, side="left")), len(ladder) - 1)]


def text_lengths(padding_mask):
    """Per example, the position after its last real token (a row of
    `padding_mask` all 0 has length 0): what trailing padding can be cut to.
    Extra axes (e.g. multiple choice's choices) take their longest.

    Args:
        padding_mask: NumPy array or tensor `(batch, ..., sequence)`. 1 at real tokens.

    Returns:
        int32 array or tensor `(batch,)`.

    Example:

    >>> text_lengths(np.array([[1, 1, 0, 0], [1, 0, 1, 0], [0, 0, 0, 0]])).tolist()
    [2, 3, 0]
    """
    if isinstance(padding_mask, tf.Tensor):
        positions = tf.range(1, tf.shape(padding_mask)[-1] + 1)
        ends = tf.where(tf.cast(padding_mask, tf.bool), positions, 0)
        return tf.reduce_max(tf.reshape(ends, [tf.shape(ends)[0], -1]), axis=-1)
    mask = np.asarray(padding_mask)
    ends = np.where(mask.astype(bool), np.arange(1, mask.shape[-1] + 1), 0)
    return ends.reshape(len(ends), -1).max(axis=-1, initial=0).astype("int32")


def cut_to(length, x, y=None, sample_weight=None, labels_per_token=False):
    """`(x, y, sample_weight)` with the packed inputs of `x` (`SEQUENCE_KEYS`,
    sequence last) and, for per-token labels, `y` and `sample_weight` cut to
    `length` positions. Works on NumPy arrays and tensors.

    Example:

    >>> x = {"token_ids": np.array([[2, 5, 3, 0]]), "padding_mask": np.array([[1, 1, 1, 0]])}
    >>> cut_to(3, x, np.array([1]))[0]["token_ids"].tolist()
    [[2, 5, 3]]
    """
    x = dict(x)
    for key in SEQUENCE_KEYS:
        if key in x:
            x[key] = x[key][..., :length]
    if labels_per_token:  # labels and weights per token, (batch, sequence); per example: as they are
        y, sample_weight = (v[..., :length] if len(getattr(v, "shape", ())) > 1 else v for v in (y, sample_weight))
    return x, y, sample_weight


def length_batches(lengths, batch_size, order="by_length", seed=0, epoch=0, window=50):
    """Which examples go in each batch, and in which order the batches run.

    - `"given"`: the examples in their order, `batch_size` at a time.
    - `"by_length"`: sorted by length (ties in their order), then batched,
      the short batch (if any) first: the least padding, for `predict` and
      `evaluate` (results go back to the caller's order).
    - `"shuffled"`: for training, as Hugging Face's `group_by_length`: a
      permutation drawn from `(seed, epoch)`, cut into windows of
      `window · batch_size` examples, each sorted by length (longest first)
      and batched; then the batches shuffled. Epoch k's batches depend only
      on `(seed, k)`, so a `fit` resumed at epoch k sees the batches the
      uninterrupted one saw. Pass each example's rung of the ladder as its
      length (`LengthBatches` does): examples of one rung then stay in random
      order, so batches are as random as the padding allows (sorting by exact
      length would pad the same, but makes batches whose labels follow
      length, e.g. longer reviews, all in one batch).

    Args:
        lengths: int array `(n,)`. Each example's length (or its rung).
        batch_size: int. Examples per batch (the last one may be smaller).
        order: str. `"given"`, `"by_length"` or `"shuffled"`. Defaults to `"by_length"`.
        seed: int. With `epoch`, what `"shuffled"` draws from. Defaults to `0`.
        epoch: int. Defaults to `0`.
        window: int. Batches per sorting window for `"shuffled"`. Defaults to `50`.

    Returns:
        A list of int arrays, the example indices of each batch.

    Example:

    >>> lengths = np.array([30, 5, 12, 6, 29, 11])
    >>> [b.tolist() for b in length_batches(lengths, 4)]
    [[1, 3], [5, 2, 4, 0]]
    >>> batches = length_batches(lengths, 2, "shuffled", seed=1, epoch=3)
    >>> sorted(np.concatenate(batches).tolist()), len(batches)
    ([0, 1, 2, 3, 4, 5], 3)
    >>> all((a == b).all() for a, b in zip(batches, length_batches(lengths, 2, "shuffled", seed=1, epoch=3)))
    True
    """
    lengths = np.asarray(lengths)
    n = len(lengths)
    if n == 0:
        return []
    if order == "given":
        rows = np.arange(n)
    elif order == "by_length":
        # The short batch first: its shape differs from the next one's in both
        # axes, so TensorFlow's `reduce_retracing` generalises at its second trace.
        return np.split(np.argsort(lengths, kind="stable"), range(n % batch_size or batch_size, n, batch_size))
    elif order == "shuffled":
        generator = np.random.default_rng([seed, epoch])
        permutation = generator.permutation(n)
        size = window * batch_size
        # Longest first in each window: its batches have the least spread of lengths.
        windows = [w[np.argsort(-lengths[w], kind="stable")] for w in np.split(permutation, range(size, n, size))]
        batches = np.split(np.concatenate(windows), range(batch_size, n, batch_size))
        return list(map(batches.__getitem__, generator.permutation(len(batches))))
    else:
        raise ValueError(f"order must be 'given', 'by_length' or 'shuffled'; got {order!r}.")
    return np.split(rows, range(batch_size, n, batch_size))
