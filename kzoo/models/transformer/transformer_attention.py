"""Every attention map of a Transformer for one source and target (the
paper's Figures 3-5 draw them): encoder self-attention, decoder (masked)
self-attention and encoder-decoder attention, per layer and head.
"""

from keras import ops


def attention_maps(model, encoder_token_ids, decoder_token_ids):
    """The attention weights of every layer and head (sec. 3.2.3, Figures 3-5).

    Runs the same layers as `Transformer.encode`/`decode` (inference: no
    dropout), asking each attention sublayer for its softmax weights.

    Args:
        model: `kzoo.Transformer`. The model (`self` of `Transformer.attention_maps`).
        encoder_token_ids: int tensor of shape `(batch, source_length)`. The source ids, `padding_id` for padding.
        decoder_token_ids: int tensor of shape `(batch, target_length)`. The decoder's input: `start_id`, then the target.

    Returns:
        A dict of three lists with one float tensor per layer:
        `"encoder_self_attention"` `(batch, heads, source_length, source_length)`,
        `"decoder_self_attention"` `(batch, heads, target_length, target_length)`
        and `"cross_attention"` `(batch, heads, target_length, source_length)`.
        Row `i` of a decoder map is the query at input position `i`, which
        predicts target token `i + 1`.

    Example:

    >>> import numpy as np
    >>> from kzoo import Transformer
    >>> model = Transformer(vocabulary_size=20, num_layers=2, hidden_dim=8,
    ...                     intermediate_dim=16, num_heads=2)
    >>> maps = model.attention_maps(np.array([[5, 6, 3, 0]]), np.array([[2, 7, 8]]))
    >>> [tuple(m[0].shape) for m in maps.values()]
    [(1, 2, 4, 4), (1, 2, 3, 3), (1, 2, 3, 4)]
    """
    model.check_token_ids(encoder_token_ids, "encoder_token_ids")
    model.check_token_ids(decoder_token_ids, "decoder_token_ids")
    source_mask = ops.not_equal(encoder_token_ids, model.padding_id)
    target_mask = ops.not_equal(decoder_token_ids, model.padding_id)
    maps = {"encoder_self_attention": [], "decoder_self_attention": [], "cross_attention": []}
    x = model.embed(encoder_token_ids, "encoder")
    for layer in model.encoder_layers:
        x, scores = layer(x, padding_mask=source_mask, return_attention_scores=True)
        maps["encoder_self_attention"].append(scores)
    memory, y = x, model.embed(decoder_token_ids, "decoder")
    for layer in model.decoder_layers:
        y, scores = layer(
            y, memory, decoder_padding_mask=target_mask, encoder_padding_mask=source_mask,
            return_attention_scores=True,
        )
        maps["decoder_self_attention"].append(scores["self_attention"])
        maps["cross_attention"].append(scores["cross_attention"])
    return maps
