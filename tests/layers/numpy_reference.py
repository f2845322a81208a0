"""Independent float64 numpy references for the kzoo layers, built from a layer's own weights.

Nothing here calls kzoo or `keras.ops` for the arithmetic: the formulas are
written out from "Attention Is All You Need" (eq. 1, eq. 2, sec. 3.1, 3.2.3)
so that the layer tests compare kzoo against something it could disagree with.
"""

import math

import keras
import numpy as np
from keras import ops


def as_float64(x):
    """A backend tensor (any float dtype, bfloat16 included) as a float64 numpy array."""
    if not isinstance(x, np.ndarray):
        x = ops.convert_to_numpy(ops.cast(x, "float32"))
    return np.asarray(x, dtype=np.float64)


def randomize_weights(layer, seed=0, scale=0.3):
    """Overwrites every weight of `layer` with random values (biases and LayerNorm included).

    Default initializers give zero biases and unit LayerNorm scales, under which
    a reference that forgot a bias or a LayerNorm parameter would still agree.
    LayerNorm scales become `1 + noise` so the outputs keep unit size.
    """
    rng = np.random.default_rng(seed)
    for variable in layer.weights:
        values = rng.normal(0.0, scale, size=tuple(variable.shape))
        if variable.name == "gamma":
            values = 1.0 + values
        variable.assign(values.astype(keras.backend.standardize_dtype(variable.dtype)))
    return layer


# Activations, written from their closed forms.

_erf = np.vectorize(math.erf, otypes=[np.float64])


def relu(x):
    return np.maximum(x, 0.0)


def gelu_exact(x):
    """`x * Phi(x) = 0.5 x (1 + erf(x / sqrt(2)))`."""
    x = np.asarray(x, dtype=np.float64)
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    """`0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))`."""
    x = np.asarray(x, dtype=np.float64)
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


ACTIVATIONS = {"relu": relu, "gelu": gelu_exact, "gelu_approximate": gelu_tanh}


def softmax(x, axis=-1):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def normalize(x, gamma, beta, epsilon):
    """Layer normalization over the last axis: `(x - mean) / sqrt(var + eps) * gamma + beta`."""
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def layer_norm(x, layer):
    """`keras.layers.LayerNormalization` over the last axis, from its gamma/beta/epsilon."""
    return normalize(x, as_float64(layer.gamma), as_float64(layer.beta), layer.epsilon)


def dense(x, layer):
    """`x W + b` for a `keras.layers.Dense`."""
    out = np.asarray(x, dtype=np.float64) @ as_float64(layer.kernel)
    return out + as_float64(layer.bias) if layer.bias is not None else out


def feed_forward(layer, x):
    """Eq. 2: `act(x W1 + b1) W2 + b2` for a `kzoo.layers.FeedForward`."""
    hidden = ACTIVATIONS[layer.activation](dense(x, layer.intermediate_dense))
    return dense(hidden, layer.output_dense)


def _project(x, einsum_dense, equation):
    out = np.einsum(equation, np.asarray(x, dtype=np.float64), as_float64(einsum_dense.kernel))
    if einsum_dense.bias is not None:
        out = out + as_float64(einsum_dense.bias)
    return out


def attention_mask_3d(mask, batch, query_length, key_length):
    """A kzoo attention mask (`(B, S)`, `(B|1, 1|T, S)`) as a boolean `(B, T, S)` array."""
    mask = np.asarray(ops.convert_to_numpy(mask)).astype(bool)
    if mask.ndim == 2:
        mask = mask[:, None, :]
    return np.broadcast_to(mask, (batch, query_length, key_length))


def multi_head_attention(layer, query, value=None, key=None, mask=None):
    """Sec. 3.2.2 / eq. 1 from a `kzoo.layers.MultiHeadAttention`'s weights.

    `head_i = softmax(Q W_i^Q (K W_i^K)^T / sqrt(d_k)) V W_i^V`, output
    `Concat(heads) W^O`. Masked logits are -inf; a query row with no visible
    key has its mask lifted and attends over every key with its ordinary
    softmax (kzoo's documented behaviour, instead of NaN).

    Returns:
        `(output (B, T, d_out), probabilities (B, h, T, S))`, float64.
    """
    value = query if value is None else value
    key = value if key is None else key
    q = _project(query, layer.query_dense, "btc,chd->bthd")
    k = _project(key, layer.key_dense, "bsc,chd->bshd")
    v = _project(value, layer.value_dense, "bsc,chd->bshd")
    logits = np.einsum("bthd,bshd->bhts", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        mask = attention_mask_3d(mask, q.shape[0], q.shape[1], k.shape[1])
        mask = mask | ~mask.any(axis=-1, keepdims=True)
        logits = np.where(mask[:, None], logits, -np.inf)
    probabilities = softmax(logits, axis=-1)
    context = np.einsum("bhts,bshd->bthd", probabilities, v)
    return _project(context, layer.output_dense, "bthd,hde->bte"), probabilities


def _residual(x, sublayer, norm, normalize_first):
    """Post-LN `LN(x + f(x))` (sec. 3.1) or pre-LN `x + f(LN(x))`."""
    if normalize_first:
        return x + sublayer(layer_norm(x, norm))
    return layer_norm(x + sublayer(x), norm)


def encoder_block(block, x, mask=None):
    """A `kzoo.layers.TransformerEncoderBlock` at inference (no dropout)."""
    x = np.asarray(x, dtype=np.float64)
    x = _residual(
        x,
        lambda h: multi_head_attention(block.self_attention, h, mask=mask)[0],
        block.self_attention_layer_norm,
        block.normalize_first,
    )
    return _residual(
        x,
        lambda h: feed_forward(block.feed_forward, h),
        block.feed_forward_layer_norm,
        block.normalize_first,
    )


def causal_mask(query_length, key_length, query_offset=0):
    """`(1, T, S)` boolean: query i (at absolute position i + offset) sees keys 0..i + offset."""
    rows = np.arange(query_length)[:, None] + query_offset
    return (rows >= np.arange(key_length)[None, :])[None]


def decoder_block(block, x, memory, decoder_padding_mask=None, encoder_padding_mask=None):
    """A `kzoo.layers.TransformerDecoderBlock` at inference, causal self-attention."""
    x = np.asarray(x, dtype=np.float64)
    batch, length = x.shape[:2]
    self_mask = np.broadcast_to(causal_mask(length, length), (batch, length, length))
    if decoder_padding_mask is not None:
        self_mask = self_mask & attention_mask_3d(decoder_padding_mask, batch, length, length)
    x = _residual(
        x,
        lambda h: multi_head_attention(block.self_attention, h, mask=self_mask)[0],
        block.self_attention_layer_norm,
        block.normalize_first,
    )
    x = _residual(
        x,
        lambda h: multi_head_attention(
            block.cross_attention, h, memory, mask=encoder_padding_mask
        )[0],
        block.cross_attention_layer_norm,
        block.normalize_first,
    )
    return _residual(
        x,
        lambda h: feed_forward(block.feed_forward, h),
        block.feed_forward_layer_norm,
        block.normalize_first,
    )
