"""One decoder layer, "Attention Is All You Need" sec. 3.1 (Figure 1, right)."""

import keras
from keras import ops

from kzoo.layers.multi_head_attention import (
    causal_attention_mask,
    merge_attention_masks,
    padding_attention_mask,
)
from kzoo.layers.transformer_block import TransformerBlock, sublayer_connection


@keras.saving.register_keras_serializable(package="kzoo")
class TransformerDecoderBlock(TransformerBlock):
    """Masked self-attention, encoder-decoder attention, feed-forward (sec. 3.1).

    Each of the three sub-layers is wrapped as `LayerNorm(x + Dropout(Sublayer(x)))`
    (post-LN; pre-LN with `normalize_first=True`). Self-attention is causal
    (sec. 3.2.3: position i attends to positions <= i). In encoder-decoder
    attention the queries come from the decoder and the keys and values from
    the encoder output, the "memory" (sec. 3.2.3).

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
        decoder_sequence: float tensor of shape `(batch, target_length,
            d_model)`. The decoder's input.
        encoder_sequence: float tensor of shape `(batch, source_length,
            d_model)` or None. The encoder output; may be omitted when
            `cross_attention_cache` holds its projections. Defaults to `None`.
        decoder_padding_mask: tensor of shape `(batch, key_length)` or None.
            For the self-attention keys (`key_length` is `target_length`, or
            the cache length when decoding with a cache). Defaults to `None`.
        encoder_padding_mask: tensor of shape `(batch, source_length)` or
            None. For the encoder-decoder attention keys. Defaults to `None`.
        use_causal_mask: bool. Whether to apply the causal mask. Defaults to `True`.
        self_attention_cache: tuple of two tensors or None. `(key_cache,
            value_cache)` for step-by-step decoding (see
            `kzoo.layers.MultiHeadAttention`). Defaults to `None`.
        self_attention_cache_update_index: int or scalar tensor. Where this
            call's tokens go in the cache. Defaults to `None`.
        cross_attention_cache: tuple of two tensors or None. Precomputed
            `(keys, values)` of the encoder output, from
            `block.cross_attention.compute_key_value(memory)`. Defaults to `None`.
        return_attention_scores: bool. Also return `{"self_attention": ...,
            "cross_attention": ...}` probabilities. Defaults to `False`.
        training: bool. Whether dropout is active. Defaults to `None`.

    Returns:
        `(batch, target_length, d_model)`; then, only when asked for, the
        scores dict and the updated self-attention cache, in that order.

    Example:

    >>> import numpy as np
    >>> block = TransformerDecoderBlock(num_heads=2, intermediate_dim=32)
    >>> target = np.random.rand(2, 4, 16).astype("float32")
    >>> memory = np.random.rand(2, 6, 16).astype("float32")
    >>> tuple(block(target, memory).shape)
    (2, 4, 16)
    """

    _OUTPUT_CHANGING_ARGUMENTS = ("return_attention_scores", "self_attention_cache")

    def _traces_call(self, arguments):
        # Without the encoder output, `call` raises its error: traced, so that it does.
        missing = arguments.get("encoder_sequence") is None and arguments.get("cross_attention_cache") is None
        return missing or super()._traces_call(arguments)

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        hidden_dim = decoder_sequence_shape[-1]
        encoder_sequence_shape = encoder_sequence_shape or decoder_sequence_shape
        self.self_attention = self._attention(hidden_dim, "self_attention")
        self.self_attention.build(decoder_sequence_shape)
        self.self_attention_layer_norm, self.self_attention_dropout = self._residual_parts(
            "self_attention", decoder_sequence_shape
        )
        self.cross_attention = self._attention(hidden_dim, "cross_attention")
        self.cross_attention.build(decoder_sequence_shape, encoder_sequence_shape)
        self.cross_attention_layer_norm, self.cross_attention_dropout = self._residual_parts(
            "cross_attention", decoder_sequence_shape
        )
        self.feed_forward = self._feed_forward()
        self.feed_forward.build(decoder_sequence_shape)
        self.feed_forward_layer_norm, self.feed_forward_dropout = self._residual_parts(
            "feed_forward", decoder_sequence_shape
        )
        self.built = True

    def call(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        use_causal_mask=True,
        self_attention_cache=None,
        self_attention_cache_update_index=None,
        cross_attention_cache=None,
        return_attention_scores=False,
        training=None,
    ):
        if encoder_sequence is None and cross_attention_cache is None:
            raise ValueError(
                f"`{self.name}` needs the encoder output: pass `encoder_sequence`, "
                "or its projections as `cross_attention_cache`."
            )
        self_mask = self._self_attention_mask(
            decoder_sequence,
            decoder_padding_mask,
            use_causal_mask,
            self_attention_cache,
            self_attention_cache_update_index,
        )
        cross_mask = (
            None if encoder_padding_mask is None else padding_attention_mask(encoder_padding_mask)
        )

        x, self_extras = sublayer_connection(
            decoder_sequence,
            lambda h: self.self_attention(
                h,
                attention_mask=self_mask,
                cache=self_attention_cache,
                cache_update_index=self_attention_cache_update_index,
                return_attention_scores=return_attention_scores,
                training=training,
            ),
            self.self_attention_layer_norm,
            self.self_attention_dropout,
            self.normalize_first,
            training,
        )
        x, cross_extras = sublayer_connection(
            x,
            lambda h: self.cross_attention(
                h,
                encoder_sequence,
                attention_mask=cross_mask,
                cache=cross_attention_cache,
                return_attention_scores=return_attention_scores,
                training=training,
            ),
            self.cross_attention_layer_norm,
            self.cross_attention_dropout,
            self.normalize_first,
            training,
        )
        x, _ = sublayer_connection(
            x, self.feed_forward, self.feed_forward_layer_norm, self.feed_forward_dropout,
            self.normalize_first, training,
        )

        results = (x,)
        if return_attention_scores:
            results += ({"self_attention": self_extras[0], "cross_attention": cross_extras[0]},)
        if self_attention_cache is not None:
            results += (self_extras[-1],)
        return results[0] if len(results) == 1 else results

    def _self_attention_mask(self, x, padding_mask, use_causal_mask, cache, cache_index):
        query_length = ops.shape(x)[1]
        key_length = query_length if cache is None else ops.shape(cache[0])[1]
        causal = None
        if use_causal_mask:
            offset = 0 if cache_index is None else cache_index
            causal = causal_attention_mask(query_length, key_length, query_offset=offset)
        padding = None if padding_mask is None else padding_attention_mask(padding_mask)
        return merge_attention_masks(causal, padding)
