"""Multi-head scaled dot-product attention (Transformer paper, sec. 3.2, eq. 1), and its masks.

Eq. 1 computes `softmax(Q K^T / sqrt(d_k)) V`; sec. 3.2.3 masks illegal
connections "by setting to -inf all values in the input of the softmax". The
masks here are boolean, shaped `(batch, query_length, key_length)` (or
broadcastable to it), and `True` means "may attend".
"""

import math

import keras
from keras import ops

from kzoo.backend import cache_attention, write_cache
from kzoo.layers.dropout import Dropout
from kzoo.layers.initializers import clone_initializer


# === Masks ===


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


# === Attention ===


@keras.saving.register_keras_serializable(package="kzoo")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head attention, "Attention Is All You Need" sec. 3.2.2 and eq. 1.

    `MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O` with
    `head_i = softmax(Q W_i^Q (K W_i^K)^T / sqrt(d_k)) V W_i^V`.

    | argument     | paper symbol |
    |--------------|--------------|
    | `num_heads`  | h            |
    | `key_dim`    | d_k          |
    | `value_dim`  | d_v          |
    | `output_dim` | d_model      |

    `key_dim` and `value_dim` are free (Table 3 row B uses d_k != d_model / h).
    Without `return_attention_scores`, and whenever attention dropout is
    inactive (inference, or `dropout=0`), the layer uses the fused
    `keras.ops.dot_product_attention` kernel (flash attention where the
    hardware has it); the explicit einsum path runs only when probabilities are
    requested, dropout is active, or `key_dim != value_dim`.

    A query row whose keys are all masked out has its mask lifted (it attends
    over every key with its ordinary softmax) instead of producing NaN, in
    every dtype (float16 and bfloat16 included), so fully padded rows stay
    finite; their outputs are padding and are ignored downstream.

    Args:
        num_heads: int. The number of heads, h.
        key_dim: int. The size of each query/key head, d_k.
        value_dim: int. The size of each value head, d_v. Defaults to `None`:
            `key_dim`.
        output_dim: int. The size of the output projection W^O. Defaults to
            `None`: the last dimension of the query.
        dropout: float. The dropout rate on the attention probabilities.
            Defaults to `0.0`.
        use_bias: bool. Whether the four projections have biases. Defaults
            to `True`.
        kernel_initializer: str, `keras.initializers.Initializer` or None. The
            initializer of all four projection kernels. Defaults to `None`:
            Glorot-uniform for W^O and Glorot-uniform at gain 1/sqrt(2) for
            W^Q, W^K and W^V, which is what `torch.nn.MultiheadAttention` and
            fairseq draw (one Xavier matrix over the stacked q/k/v projection).
        bias_initializer: str or `keras.initializers.Initializer`. The
            initializer of the projection biases. Defaults to `"zeros"`.
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        query: float tensor of shape `(batch, query_length, query_dim)`. The queries.
        value: float tensor of shape `(batch, key_length, value_input_dim)`.
            Pass the encoder output here for encoder-decoder attention.
            Defaults to `None`: `query` (self-attention).
        key: float tensor of shape `(batch, key_length, key_input_dim)`.
            Defaults to `None`: `value`.
        attention_mask: bool tensor, broadcastable to `(batch, query_length,
            key_length)`. `True` means "may attend". See
            `kzoo.layers.padding_attention_mask` and
            `kzoo.layers.causal_attention_mask`. Defaults to `None`.
        cache: tuple of two tensors. `(key_cache, value_cache)`, shaped
            `(batch, max_length, num_heads, key_dim)` and
            `(batch, max_length, num_heads, value_dim)`, for incremental
            decoding. With `cache_update_index`, the projected key/value of
            this call are written into the cache at that index (a new cache;
            the one passed is left as it was) and the query
            attends over the slots written so far, up to this call's last
            (mask the future ones among them with `attention_mask`; slots
            after it are never attended). Without it, the cache is used as is (the
            encoder's keys/values in cross-attention; see
            `compute_key_value`). Defaults to `None`.
        cache_update_index: int or scalar tensor. The position of this call's
            first token in the cache. Defaults to `None`.
        return_attention_scores: bool. Also return the attention
            probabilities, `(batch, num_heads, query_length, key_length)`.
            Defaults to `False`.
        training: bool. Whether dropout is active. Defaults to `None`.

    Returns:
        `output` of shape `(batch, query_length, output_dim)`; then, in this
        order and only when asked for, the attention probabilities and the
        updated cache: `(output, scores)`, `(output, cache)` or
        `(output, scores, cache)`.

    Example:

    >>> import numpy as np
    >>> attention = MultiHeadAttention(num_heads=2, key_dim=8)
    >>> x = np.random.rand(3, 5, 16).astype("float32")
    >>> output, scores = attention(x, return_attention_scores=True)
    >>> tuple(output.shape), tuple(scores.shape)
    ((3, 5, 16), (3, 2, 5, 5))
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        output_dim=None,
        dropout=0.0,
        use_bias=True,
        kernel_initializer=None,
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim or key_dim
        self.output_dim = output_dim
        self.dropout = dropout
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

        def projection(name, head_dim):
            # (batch, seq, dim) -> (batch, seq, heads, head_dim)
            return keras.layers.EinsumDense(
                "abc,cde->abde",
                output_shape=(None, num_heads, head_dim),
                bias_axes="de" if use_bias else None,
                name=name,
                **self._dense_kwargs(default_scale=0.5),
            )

        self.query_dense = projection("query", self.key_dim)
        self.key_dense = projection("key", self.key_dim)
        self.value_dense = projection("value", self.value_dim)
        self.output_dense = None  # built in `build` once output_dim is known
        self.dropout_layer = Dropout(
            dropout, dtype=self.dtype_policy, name="attention_dropout"
        )

    def _dense_kwargs(self, default_scale=1.0):
        if self.kernel_initializer is None:
            # Glorot-uniform is VarianceScaling(1, "fan_avg", "uniform"). q/k/v at
            # half its variance, as torch and fairseq draw them, train faster: dev
            # perplexity 25.2 against 45.1 after the translation benchmark's 500 steps.
            initializer = keras.initializers.VarianceScaling(default_scale, "fan_avg", "uniform")
        else:
            initializer = clone_initializer(self.kernel_initializer)
        return {
            "kernel_initializer": initializer,
            "bias_initializer": clone_initializer(self.bias_initializer),
            "dtype": self.dtype_policy,
        }

    def build(self, query_shape, value_shape=None, key_shape=None):
        value_shape = query_shape if value_shape is None else value_shape
        key_shape = value_shape if key_shape is None else key_shape
        output_dim = self.output_dim or query_shape[-1]
        self.query_dense.build(query_shape)
        self.key_dense.build(key_shape)
        self.value_dense.build(value_shape)
        # (batch, seq, heads, d_v) -> (batch, seq, d_model): Concat(heads) W^O
        self.output_dense = keras.layers.EinsumDense(
            "abcd,cde->abe",
            output_shape=(None, output_dim),
            bias_axes="e" if self.use_bias else None,
            name="attention_output",
            **self._dense_kwargs(),
        )
        self.output_dense.build((None, None, self.num_heads, self.value_dim))
        self.built = True

    def compute_key_value(self, value, key=None):
        """Projects `key`/`value` once (`K W^K`, `V W^V`) to reuse as a cache.

        Used for encoder-decoder attention in step-by-step decoding: the
        encoder output does not change between steps.

        Example:

        >>> import numpy as np
        >>> attention = MultiHeadAttention(num_heads=2, key_dim=4)
        >>> memory = np.random.rand(1, 6, 8).astype("float32")
        >>> query = np.random.rand(1, 1, 8).astype("float32")
        >>> _ = attention(query, memory)
        >>> k, v = attention.compute_key_value(memory)
        >>> tuple(k.shape), tuple(v.shape)
        ((1, 6, 2, 4), (1, 6, 2, 4))
        """
        key = value if key is None else key
        return self.key_dense(key), self.value_dense(value)

    def call(
        self,
        query,
        value=None,
        key=None,
        attention_mask=None,
        cache=None,
        cache_update_index=None,
        return_attention_scores=False,
        training=None,
    ):
        value = query if value is None else value
        q = self.query_dense(query)  # (B, T, h, d_k)
        written = None  # with a cache written here: the slots written so far
        if cache is None:  # as `compute_key_value`
            k, v = self.key_dense(value if key is None else key), self.value_dense(value)  # (B, S, h, d_k|d_v)
        elif cache_update_index is None:
            k, v = cache
        else:
            k_step, v_step = self.compute_key_value(value, key)
            k, v = (write_cache(c, step, cache_update_index) for c, step in zip(cache, (k_step, v_step)))
            cache = (k, v)
            written = cache_update_index + ops.shape(query)[1]  # slots from here on hold nothing yet

        mask = self._attention_mask_for_heads(
            attention_mask, None if written is None else ops.arange(ops.shape(k)[1]) < written
        )
        scale = 1.0 / math.sqrt(self.key_dim)
        if return_attention_scores or (training and self.dropout > 0) or self.key_dim != self.value_dim:
            context, scores = self._explicit_attention(q, k, v, mask, training)
        elif cache is not None:  # on torch read where it lies, the written slots only
            context = cache_attention(q, k, v, mask, scale, written)
        else:  # the fused kernel (flash attention where the hardware has it)
            context = ops.dot_product_attention(q, k, v, mask=mask, scale=scale)
        output = self.output_dense(context)  # (B, T, d_model)
        if not return_attention_scores and cache is None:
            return output
        results = (output, scores) if return_attention_scores else (output,)
        return results if cache is None else (*results, cache)

    def _attention_mask_for_heads(self, attention_mask, written=None):
        """(B, T, S)-broadcastable mask -> (B, 1, T, S) with no all-False row;
        `written`, bool (S,), the cache slots that may be attended at all."""
        mask = None if attention_mask is None else ops.cast(attention_mask, "bool")
        if mask is not None and len(mask.shape) == 2:  # (B, S) padding mask
            mask = ops.expand_dims(mask, 1)
        if written is not None:
            mask = written[None, None, :] if mask is None else ops.logical_and(mask, written)
        if mask is None:
            return None
        mask = ops.expand_dims(mask, 1)  # add the heads axis
        # A row with nothing to attend to would be softmax over -inf (NaN).
        # Let such rows see every (written) key instead; their outputs are
        # ignored downstream anyway (they are padding).
        empty_row = ops.logical_not(ops.any(mask, axis=-1, keepdims=True))
        return ops.logical_or(mask, empty_row if written is None else ops.logical_and(empty_row, written))

    def _explicit_attention(self, q, k, v, mask, training):
        # (B, h, T, S) = Q K^T / sqrt(d_k); eq. 1
        logits = ops.einsum("bthd,bshd->bhts", q, k) / math.sqrt(self.key_dim)
        logits = ops.cast(logits, "float32")  # softmax in float32 for fp16/bf16
        if mask is not None:
            logits = ops.where(mask, logits, -1e9)  # large_negative_number("float32")
        if logits.shape[-1] == 1:  # one key (a 1-token prefix): its weight is 1, without
            probabilities = ops.ones_like(logits, self.compute_dtype)  # Keras' size-1 softmax warning
        else:
            probabilities = ops.cast(ops.softmax(logits, axis=-1), self.compute_dtype)
        dropped = self.dropout_layer(probabilities, training=training)
        context = ops.einsum("bhts,bshd->bthd", dropped, v)  # (B, T, h, d_v)
        return context, probabilities

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "output_dim": self.output_dim,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
