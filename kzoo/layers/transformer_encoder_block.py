"""One encoder layer, "Attention Is All You Need" sec. 3.1 (Figure 1, left)."""

import functools

import keras
from keras import ops

from kzoo.layers.multi_head_attention import merge_attention_masks, padding_attention_mask
from kzoo.layers.transformer_block import TransformerBlock, sublayer_connection


@keras.saving.register_keras_serializable(package="kzoo")
class TransformerEncoderBlock(TransformerBlock):
    """Self-attention then a feed-forward network, each wrapped as
    `LayerNorm(x + Dropout(Sublayer(x)))` (sec. 3.1; post-LN as in the paper,
    pre-LN with `normalize_first=True`). BERT's encoder layer is this block
    with GELU and `attention_dropout=0.1` (BERT sec. 3).

    Args:
        num_heads: int. The number of attention heads, h.
        intermediate_dim: int. The feed-forward inner size, d_ff.
        key_dim: int or None. The query/key size per head, d_k. Defaults to
            `None`: d_model / h.
        value_dim: int or None. The value size per head, d_v. Defaults to
            `None`: `key_dim`.
        dropout: float. P_drop, applied to every sub-layer output before the
            residual add. Defaults to `0.1`.
        attention_dropout: float. Dropout on attention probabilities; the
            Transformer paper has none, BERT uses 0.1. Defaults to `0.0`.
        activation: str. The feed-forward activation: "relu", "gelu" or
            "gelu_approximate". Defaults to `"relu"`.
        layer_norm_epsilon: float. The LayerNorm epsilon (BERT: 1e-12).
            Defaults to `1e-6`, as in tensor2tensor.
        normalize_first: bool. Pre-LN instead of the paper's post-LN.
            Defaults to `False`.
        kernel_initializer: str, `keras.initializers.Initializer` or None. The
            initializer of every kernel. Defaults to `None`: Glorot-uniform,
            at gain 1/sqrt(2) for W^Q, W^K and W^V (see `MultiHeadAttention`).
        bias_initializer: str or `keras.initializers.Initializer`. The
            initializer of every bias. Defaults to `"zeros"`.
        **kwargs: `keras.layers.Layer` arguments.

    Call arguments:
        inputs: float tensor of shape `(batch, sequence_length, d_model)`.
            The block's input.
        padding_mask: tensor of shape `(batch, sequence_length)` or None.
            Non-zero for real tokens. Defaults to `None`.
        attention_mask: bool tensor of shape `(batch, sequence_length,
            sequence_length)` or None. Combined with `padding_mask` by
            logical AND. Defaults to `None`.
        output_positions: int tensor of shape `(batch, P)` or None. Compute
            the block's outputs only at these positions. Every position still
            serves as a key and value, so the rows equal those of the full
            output; the queries, the output projection and the feed-forward
            network run on `P` rows instead of `sequence_length`. For the last
            layer of a model whose head reads a few positions (BERT's masked
            LM, sec. 3.1 of the BERT paper: no work for outputs the loss never
            reads). Defaults to `None`.
        return_attention_scores: bool. Also return the attention
            probabilities `(batch, num_heads, query_length, sequence_length)`.
            Defaults to `False`.
        training: bool. Whether dropout is active. Defaults to `None`.

    Returns:
        `(batch, sequence_length, d_model)` (`(batch, P, d_model)` with
        `output_positions`), or `(outputs, scores)`.

    Example:

    >>> import numpy as np
    >>> block = TransformerEncoderBlock(num_heads=2, intermediate_dim=32)
    >>> x = np.random.rand(2, 5, 16).astype("float32")
    >>> mask = np.array([[1] * 5, [1, 1, 1, 0, 0]])
    >>> full = block(x, padding_mask=mask)
    >>> tuple(full.shape)
    (2, 5, 16)
    >>> rows = block(x, padding_mask=mask, output_positions=np.array([[0, 4], [2, 1]]))
    >>> tuple(rows.shape)
    (2, 2, 16)
    >>> from keras import ops
    >>> rows, full = ops.convert_to_numpy(rows), ops.convert_to_numpy(full)
    >>> bool(np.allclose(rows[1, 0], full[1, 2], atol=1e-5))
    True
    """

    _OUTPUT_CHANGING_ARGUMENTS = ("output_positions", "return_attention_scores")

    def build(self, inputs_shape):
        hidden_dim = inputs_shape[-1]
        self.self_attention = self._attention(hidden_dim, "self_attention")
        self.self_attention.build(inputs_shape)
        self.self_attention_layer_norm, self.self_attention_dropout = self._residual_parts(
            "self_attention", inputs_shape
        )
        self.feed_forward = self._feed_forward()
        self.feed_forward.build(inputs_shape)
        self.feed_forward_layer_norm, self.feed_forward_dropout = self._residual_parts(
            "feed_forward", inputs_shape
        )
        self.built = True

    def call(
        self,
        inputs,
        padding_mask=None,
        attention_mask=None,
        output_positions=None,
        return_attention_scores=False,
        training=None,
    ):
        mask = None if padding_mask is None else padding_attention_mask(padding_mask)
        if attention_mask is not None:
            mask = merge_attention_masks(mask, attention_mask)
        queries, keys = inputs, None  # keys None: self-attention over the queries
        if output_positions is not None:
            queries = gather_positions(inputs, output_positions)
            keys = self.self_attention_layer_norm(inputs) if self.normalize_first else inputs
            if mask is not None and mask.shape[1] != 1:  # one row per query
                mask = gather_positions(mask, output_positions)
        attention = functools.partial(  # keys None: self-attention over the queries
            self.self_attention, value=keys, attention_mask=mask,
            return_attention_scores=return_attention_scores, training=training,
        )
        x, scores = sublayer_connection(
            queries, attention, self.self_attention_layer_norm, self.self_attention_dropout,
            self.normalize_first, training,
        )
        x, _ = sublayer_connection(
            x, self.feed_forward, self.feed_forward_layer_norm, self.feed_forward_dropout,
            self.normalize_first, training,
        )
        return (x, scores[0]) if return_attention_scores else x


def gather_positions(x, positions):
    """Rows `positions` `(batch, P)` of `x` `(batch, length, ...)`: `(batch, P, ...)`.

    The gather of BERT's masked-LM output (BERT sec. 3.1, `gather_indexes` in
    google-research/bert), for hidden states and attention masks alike.

    Example:

    >>> import numpy as np
    >>> x = np.arange(12).reshape(2, 3, 2)
    >>> ops.convert_to_numpy(gather_positions(x, np.array([[2], [0]]))).tolist()
    [[[4, 5]], [[6, 7]]]
    """
    # Rows of x flattened to (batch * length, ...), not `take_along_axis`,
    # whose torch kernel fixes the batch and length of a `torch.export`.
    shape = ops.shape(x)
    rows = ops.reshape(x, (-1, *shape[2:]))
    row = ops.cumsum(ops.ones_like(positions[:, :1], dtype="int32"), axis=0) - 1  # (batch, 1): 0, 1, ...
    offsets = row * shape[1]  # not `arange`, which a symbolic batch (jax.export) cannot size
    return ops.take(rows, ops.cast(positions, "int32") + offsets, axis=0)
