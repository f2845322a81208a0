"""One encoder layer, "Attention Is All You Need" sec. 3.1 (Figure 1, left)."""

import keras

from kzoo.layers.masks import merge_attention_masks, padding_attention_mask
from kzoo.layers.transformer_block import TransformerBlock


@keras.saving.register_keras_serializable(package="kzoo")
class TransformerEncoderBlock(TransformerBlock):
    """Self-attention then a feed-forward network, each wrapped as
    `LayerNorm(x + Dropout(Sublayer(x)))` (sec. 3.1; post-LN as in the paper,
    pre-LN with `normalize_first=True`). BERT's encoder layer is this block
    with GELU and `attention_dropout=0.1` (BERT sec. 3).

    Constructor arguments are those of `kzoo.layers.TransformerBlock`
    (`num_heads`, `intermediate_dim`, `key_dim`, `value_dim`, `dropout`,
    `attention_dropout`, `activation`, `layer_norm_epsilon`,
    `normalize_first`, initializers).

    Call arguments:
        inputs: `(batch, sequence_length, d_model)`.
        padding_mask: optional `(batch, sequence_length)`, non-zero for real tokens.
        attention_mask: optional boolean `(batch, sequence_length, sequence_length)`;
            combined with `padding_mask` by logical AND.
        return_attention_scores: also return the attention probabilities
            `(batch, num_heads, sequence_length, sequence_length)`.
        training: whether dropout is active.

    Returns:
        `(batch, sequence_length, d_model)`, or `(outputs, scores)`.

    Example:

    >>> import numpy as np
    >>> block = TransformerEncoderBlock(num_heads=2, intermediate_dim=32)
    >>> x = np.random.rand(2, 5, 16).astype("float32")
    >>> tuple(block(x, padding_mask=np.array([[1] * 5, [1, 1, 1, 0, 0]])).shape)
    (2, 5, 16)
    """

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
        return_attention_scores=False,
        training=None,
    ):
        mask = merge_attention_masks(
            None if padding_mask is None else padding_attention_mask(padding_mask),
            attention_mask,
        )
        x, scores = self._residual(
            inputs,
            lambda h: self.self_attention(
                h,
                attention_mask=mask,
                return_attention_scores=return_attention_scores,
                training=training,
            ),
            self.self_attention_layer_norm,
            self.self_attention_dropout,
            training,
        )
        x, _ = self._residual(
            x, self.feed_forward, self.feed_forward_layer_norm, self.feed_forward_dropout, training
        )
        return (x, scores[0]) if return_attention_scores else x
