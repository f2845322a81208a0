"""Backend-specific decoding, part of `kzoo.backend`'s one marked place: the
key/value caches of a search (`kzoo.models.transformer.beam_search`,
`Transformer.generate`), written, read, reordered and grown as each engine
does it fastest; plain `keras.ops` on TensorFlow and JAX, where static shapes
compile. The benchmarks page measures what each buys."""

import contextlib

import keras

from kzoo.backend import torch


def write_cache(cache, update, index):
    """`cache` `(batch, slots, ...)` with `update` `(batch, n, ...)` written at
    slots `index .. index + n - 1`: on torch inside `search_loop` in place
    (the tensor returned is `cache`; Keras' `slice_update` copied the whole
    buffer every decoder step), else into a copy; a new tensor elsewhere (`ops.slice_update`)."""
    if keras.backend.backend() == "torch":
        return torch.write_cache(cache, update, index)
    start = [0, index] + [0] * (len(cache.shape) - 2)
    return keras.ops.slice_update(cache, start, keras.ops.cast(update, cache.dtype))


@contextlib.contextmanager
def search_loop(steps=None):
    """A context for a search loop that owns its caches (`Transformer.generate`):
    on torch `write_cache` writes in place, and `steps` (from `decoder_steps`)
    look the model's variables up once, not at every call (half a millisecond
    a step, a tenth of a greedy one). Outside it, and on the other backends, a
    write leaves the cache passed as it was, the same on all."""
    if keras.backend.backend() != "torch":
        yield
        return
    with torch.owned_caches(), (steps.fixed_weights() if isinstance(steps, torch.TracedCalls)
                                else contextlib.nullcontext()):
        yield


def cache_attention(query, key_cache, value_cache, mask, scale, length=None):
    """`ops.dot_product_attention(query, key_cache, value_cache, mask=mask,
    scale=scale)` where `mask` (bool `(batch, heads, T, slots)`, broadcastable,
    or None) leaves the slots from `length` on (int or scalar tensor; None:
    none) unattended: on torch over the first `length` slots only, read where
    they lie (`torch.cache_attention`; Keras copies the keys and values heads
    first every call); elsewhere over all, masked (static shapes), one query
    (a search step) as products and sums over the caches where they lie."""
    if keras.backend.backend() == "torch":
        return torch.cache_attention(query, key_cache, value_cache, mask, scale, length)
    if query.shape[1] != 1:
        return keras.ops.dot_product_attention(query, key_cache, value_cache, mask=mask, scale=scale)
    # XLA's dots copied every cache heads first at every step: a third of a beam step.
    # Sums in float32, as a dot accumulates (the casts fuse into the reads).
    ops, dtype = keras.ops, keras.backend.standardize_dtype(query.dtype)
    query, key_cache, value_cache = (ops.cast(x, "float32") for x in (query, key_cache, value_cache))
    logits = ops.sum(query * key_cache, axis=-1) * scale  # (batch, slots, heads)
    if mask is not None:  # (batch | 1, 1 | heads, 1, slots) -> (batch | 1, slots, 1 | heads)
        logits = ops.where(ops.transpose(mask[:, :, 0], (0, 2, 1)), logits, float("-inf"))
    weights = ops.softmax(logits, axis=1)
    return ops.cast(ops.sum(weights[..., None] * value_cache, axis=1, keepdims=True), dtype)  # (batch, 1, heads, d_v)


def attention_layout(cache):
    """A key/value cache `(batch, slots, heads, dim)`, on torch stored heads
    first (same shape and values: the layout its attention kernel reads twice
    as fast, kept by `take_rows`, `cache_rows`, `write_cache`); as is elsewhere."""
    return torch.attention_layout(cache) if keras.backend.backend() == "torch" else cache


def take_rows(x, rows):
    """`ops.take(x, rows, axis=0)`, on torch in `x`'s memory layout (`attention_layout`)."""
    return torch.take_rows(x, rows) if keras.backend.backend() == "torch" else keras.ops.take(x, rows, axis=0)


def cache_rows():
    """A function `(cache, rows, length) -> tensor`: the rows `rows` (int
    `(n,)`) of a key/value cache `(batch, slots, ...)` whose slots from `length`
    on hold zeros, as `ops.take(cache, rows, axis=0)`. On torch only the first
    `length` slots move, into caches it took before and that are free now
    (`torch.CacheRows`: a beam step moved whole new buffers, then most of its
    time); elsewhere all of them (`take_rows`). One per search: each call frees `cache`."""
    if keras.backend.backend() == "torch":
        return torch.CacheRows()
    return lambda cache, rows, length: take_rows(cache, rows)


def cache_lengths(max_length):
    """The key/value cache lengths a search grows through to `max_length`
    (`beam_search`'s `grow_cache`): on torch `(max_length,)`, whose steps read
    and move the written slots only; elsewhere 16, 32, 64, ... while 1.5 times
    the rung fits, then `max_length` (static shapes: a step reads, and a beam
    step moves, the whole cache; a longer ladder compiles more loops).

    Example:

    >>> expected = (66,) if keras.backend.backend() == "torch" else (16, 32, 66)
    >>> cache_lengths(66) == expected, cache_lengths(200)[-1]
    (True, 200)
    """
    if keras.backend.backend() == "torch":
        return (max_length,)
    lengths, rung = [], 16
    while rung * 1.5 <= max_length:
        lengths, rung = lengths + [rung], rung * 2
    return (*lengths, max_length)
