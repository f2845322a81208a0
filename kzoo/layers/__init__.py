"""Backend-agnostic building blocks of "Attention Is All You Need" (and BERT)."""

from kzoo.layers.dropout import Dropout
from kzoo.layers.transformer_block import FeedForward, TransformerBlock, get_activation
from kzoo.layers.multi_head_attention import (
    MultiHeadAttention,
    causal_attention_mask,
    large_negative_number,
    merge_attention_masks,
    padding_attention_mask,
)
from kzoo.layers.embeddings import PositionEmbedding, SinusoidalPositionEncoding, TokenEmbedding
from kzoo.layers.transformer_decoder_block import TransformerDecoderBlock
from kzoo.layers.transformer_encoder_block import TransformerEncoderBlock

__all__ = [
    "Dropout",
    "FeedForward",
    "MultiHeadAttention",
    "PositionEmbedding",
    "SinusoidalPositionEncoding",
    "TokenEmbedding",
    "TransformerBlock",
    "TransformerDecoderBlock",
    "TransformerEncoderBlock",
    "causal_attention_mask",
    "get_activation",
    "large_negative_number",
    "merge_attention_masks",
    "padding_attention_mask",
]
