"""Attention maps as pictures: a layers x heads grid of heatmaps (BERT sec.
5.3 reads features and attention from every layer) and the Transformer
paper's view of a translation (Figures 3-5: encoder self-attention drawn as
lines between the tokens, encoder-decoder attention as source x output maps).
"""

import os

import keras
import numpy as np

from kzoo.models.bert import BertBackbone, BertPreprocessor, BertTokenizer
from kzoo.visualize.figures import new_figure, save_figure

TICK_LABEL_LIMIT = 48  # more tokens than this: no tick labels (unreadable)
LINE_THRESHOLD = 0.05  # weights below this draw no line


def plot_attention(scores, tokens, query_tokens=None, layers=None, heads=None, title=None, path=None):
    """A grid of attention heatmaps, one row per layer and one column per head.

    Args:
        scores: float array or list. Attention weights `(layers, heads,
            queries, keys)`, or a list with one `(heads, queries, keys)` (or
            `(1, heads, queries, keys)`) array per layer, such as
            `BertBackbone(..., return_attention_scores=True)["attention_scores"]`.
            Any backend's tensors.
        tokens: list of str. The key tokens (columns).
        query_tokens: list of str or None. The query tokens (rows). Defaults
            to `None`: the same as `tokens` (self-attention).
        layers: list of int or None. Layer indices to draw (0-based,
            negative from the end). Defaults to `None`: all.
        heads: list of int or None. Head indices to draw. Defaults to `None`: all.
        title: str or None. A title over the grid. Defaults to `None`.
        path: str, `os.PathLike` or None. Where to save (`.png`, `.svg` or
            `.pdf`). Defaults to `None`: not saved.

    Returns:
        A `matplotlib.figure.Figure`; axes `k` shows layer `layers[k //
        len(heads)]`, head `heads[k % len(heads)]`, its image's array the weights.

    Example:

    >>> import numpy as np
    >>> scores = np.full((2, 3, 4, 4), 0.25)  # 2 layers, 3 heads, 4 tokens
    >>> figure = plot_attention(scores, ["[CLS]", "hello", "world", "[SEP]"])
    >>> len(figure.axes) - 1  # 6 maps and a colour bar
    6
    """
    maps = _as_layers(scores)
    layers = _select(layers, len(maps), "layer")
    heads = _select(heads, maps[0].shape[0], "head")
    query_tokens = list(tokens) if query_tokens is None else list(query_tokens)
    queries, keys = maps[0].shape[1:]
    if (queries, keys) != (len(query_tokens), len(tokens)):
        raise ValueError(
            f"The attention maps are {queries} queries x {keys} keys but {len(query_tokens)} query "
            f"and {len(tokens)} key tokens were given: pass one token per row and column."
        )
    cell = min(2.6, max(1.4, 0.16 * max(queries, keys)))
    figure = new_figure(cell * len(heads) + 0.8, cell * len(layers) + (0.5 if title else 0.2))
    grid = figure.subplots(len(layers), len(heads), squeeze=False)
    image = None
    for row, layer in enumerate(layers):
        for column, head in enumerate(heads):
            axes = grid[row][column]
            image = axes.imshow(maps[layer][head], vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto",
                                interpolation="nearest")
            axes.set_title(f"layer {layer + 1}, head {head + 1}", fontsize=8)
            _label(axes, tokens if row == len(layers) - 1 else None,
                   query_tokens if column == 0 else None)
    figure.colorbar(image, ax=grid, shrink=0.6, label="attention weight")
    if title:
        figure.suptitle(title)
    return _finish(figure, path)


def plot_bert_attention(model, text, pair=None, preprocessor=None, layers=None, heads=None, path=None):
    """Every attention map of a BERT model for one text, from raw text (BERT sec. 5.3).

    Args:
        model: str, `os.PathLike`, `kzoo.BertBackbone` or a kzoo BERT task.
            A preset name or directory (its backbone and tokenizer are
            loaded), a backbone, or a task (its backbone and preprocessor).
        text: str. The text (segment A).
        pair: str or None. A second segment (B). Defaults to `None`.
        preprocessor: `kzoo.BertPreprocessor` or None. Packs the text.
            Defaults to `None`: the task's, or the preset's sized to the text.
        layers: list of int or None. Layers to draw. Defaults to `None`: all.
        heads: list of int or None. Heads to draw. Defaults to `None`: all.
        path: str, `os.PathLike` or None. Where to save. Defaults to `None`.

    Returns:
        A `matplotlib.figure.Figure` as `plot_attention` draws it, with the
        WordPiece tokens (`[PAD]` positions left out) as tick labels.

    Example:

    >>> import kzoo
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat"]
    >>> backbone = kzoo.BertBackbone(vocabulary_size=8, num_layers=2, num_heads=2,
    ...                              hidden_dim=8, intermediate_dim=16)
    >>> packer = kzoo.BertPreprocessor(kzoo.BertTokenizer(vocabulary), sequence_length=8)
    >>> figure = plot_bert_attention(backbone, "The cat sat", preprocessor=packer)
    >>> figure.axes[0].images[0].get_array().shape  # [CLS] the cat sat [SEP], no padding
    (5, 5)
    """
    if isinstance(model, (str, os.PathLike)):
        backbone = BertBackbone.from_preset(model)
        if preprocessor is None:
            tokenizer = BertTokenizer.from_preset(model)
            pieces = sum(int(np.size(tokenizer.tokenize(t))) for t in (text, pair) if t is not None)
            length = min(pieces + (3 if pair is not None else 2), backbone.max_sequence_length)
            preprocessor = BertPreprocessor(tokenizer, sequence_length=length)
    else:
        backbone = getattr(model, "backbone", model)
        preprocessor = preprocessor or getattr(model, "preprocessor", None)
    if preprocessor is None:
        raise ValueError(
            f"plot_bert_attention needs a preprocessor to turn text into ids: this "
            f"{type(model).__name__} has none. Pass preprocessor=kzoo.BertPreprocessor(tokenizer, sequence_length)."
        )
    packed = preprocessor(([text], [pair]) if pair is not None else [text])
    packed = {name: keras.ops.convert_to_numpy(value) for name, value in packed.items()}
    length = int(packed["padding_mask"][0].sum())
    ids = packed["token_ids"][0, :length]
    outputs = backbone(packed, return_attention_scores=True)
    maps = [keras.ops.convert_to_numpy(s)[0, :, :length, :length] for s in outputs["attention_scores"]]
    tokens = [preprocessor.tokenizer.id_to_token(i) for i in ids]
    return plot_attention(maps, tokens, layers=layers, heads=heads, title=text if pair is None else
                          f"{text} | {pair}", path=path)


def plot_translation_attention(model, preprocessor, source, layer=-1, beam_size=4, path=None):
    """A translation's attention in the Transformer paper's style (Figures 3-5).

    Translates `source` with beam search, then draws (top) the encoder
    self-attention of one layer as lines from each source token (left) to
    the tokens it attends to (right), one colour per head, a line's opacity
    its weight (weights under 0.05 drawn not at all); and (below) that
    layer's encoder-decoder attention per head: output tokens (rows) against
    source tokens (columns).

    Args:
        model: `kzoo.Transformer`. A trained model.
        preprocessor: `kzoo.TransformerPreprocessor`. Its tokenizer reads the source and names the tokens.
        source: str. The sentence to translate.
        layer: int. The encoder and decoder layer drawn (0-based, negative
            from the end; the paper shows layer 5 of 6). Defaults to `-1`.
        beam_size: int. Beams of the search (sec. 6.1). Defaults to `4`.
        path: str, `os.PathLike` or None. Where to save. Defaults to `None`.

    Returns:
        A `matplotlib.figure.Figure`: axes 0 the lines, then one heatmap per head.

    Example:

    >>> import kzoo
    >>> tokenizer = kzoo.TransformerTokenizer(["[PAD]", "[UNK]", "[BOS]", "[EOS]", "a", "b", "c"])
    >>> packer = kzoo.TransformerPreprocessor(tokenizer, source_length=6, target_length=6)
    >>> model = kzoo.Transformer(vocabulary_size=7, num_layers=1, hidden_dim=8,
    ...                          intermediate_dim=16, num_heads=2, max_sequence_length=64)
    >>> figure = plot_translation_attention(model, packer, "a b c", beam_size=1)
    >>> figure.axes[1].images[0].get_array().shape[1]  # a b c [EOS]
    4
    """
    tokenizer = preprocessor.tokenizer
    source_ids = keras.ops.convert_to_numpy(preprocessor(source))
    source_ids = source_ids[source_ids != tokenizer.padding_id][None]
    output = keras.ops.convert_to_numpy(model.generate(source_ids, beam_size=beam_size))[0]
    ends = np.flatnonzero(output == tokenizer.end_id)
    output = output[: ends[0] + 1] if ends.size else output[output != tokenizer.padding_id]
    decoder_input = np.concatenate([[tokenizer.start_id], output[:-1]])[None].astype("int32")
    maps = model.attention_maps(source_ids, decoder_input)
    encoder = keras.ops.convert_to_numpy(maps["encoder_self_attention"][layer])[0]
    cross = keras.ops.convert_to_numpy(maps["cross_attention"][layer])[0]
    source_tokens = [tokenizer.id_to_token(i) for i in source_ids[0]]
    output_tokens = [tokenizer.id_to_token(i) for i in output]
    translation = tokenizer.detokenize(output[None]).numpy()[0].decode("utf-8")
    layer_number = _select([layer], len(maps["cross_attention"]), "layer")[0] + 1

    heads = cross.shape[0]
    cell = min(2.6, max(1.6, 0.18 * max(len(source_tokens), len(output_tokens))))
    figure = new_figure(max(6.0, cell * heads + 0.8), 0.28 * len(source_tokens) + cell + 1.2)
    top, bottom = figure.subfigures(2, 1, height_ratios=[0.28 * len(source_tokens) + 0.6, cell + 0.6])
    _draw_lines(top.subplots(), encoder, source_tokens)
    top.suptitle(f"encoder self-attention, layer {layer_number} (a colour per head)", fontsize=9)
    image = None
    for head, axes in enumerate(bottom.subplots(1, heads, squeeze=False)[0]):
        image = axes.imshow(cross[head], vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto", interpolation="nearest")
        axes.set_title(f"head {head + 1}", fontsize=8)
        _label(axes, source_tokens, output_tokens if head == 0 else None)
    bottom.colorbar(image, ax=bottom.axes, shrink=0.8, label="attention weight")
    bottom.suptitle(f"encoder-decoder attention, layer {layer_number}: output (rows) x source", fontsize=9)
    figure.suptitle(f"{source}  →  {translation}")
    return _finish(figure, path)


def _as_layers(scores):
    """A list of NumPy `(heads, queries, keys)` maps, one per layer."""
    layers = [keras.ops.convert_to_numpy(s) for s in scores]
    layers = [s[0] if s.ndim == 4 and s.shape[0] == 1 else s for s in layers]
    if not layers or any(s.ndim != 3 for s in layers):
        shapes = [tuple(s.shape) for s in layers]
        raise ValueError(
            "plot_attention takes attention weights (layers, heads, queries, keys) or one "
            f"(heads, queries, keys) array per layer for a single example; got shapes {shapes}."
        )
    return layers


def _select(indices, count, what):
    """`indices` (None: all) as non-negative ints below `count`."""
    if indices is None:
        return list(range(count))
    chosen = []
    for index in indices:
        if not isinstance(index, (int, np.integer)) or not -count <= index < count:
            raise ValueError(f"{what} {index!r} does not exist: the model has {count} {what}s (0 to {count - 1}).")
        chosen.append(int(index) % count)
    return chosen


def _label(axes, key_tokens, query_tokens):
    """Tick labels on an attention map's outer edges (none when too many to read)."""
    for tokens, set_ticks, set_labels, rotation in (
        (key_tokens, axes.set_xticks, axes.set_xticklabels, 90),
        (query_tokens, axes.set_yticks, axes.set_yticklabels, 0),
    ):
        if tokens is None or len(tokens) > TICK_LABEL_LIMIT:
            set_ticks([])
            continue
        set_ticks(range(len(tokens)))
        set_labels(tokens, fontsize=max(4, 9 - len(tokens) // 8), rotation=rotation)


def _draw_lines(axes, maps, tokens):
    """Figures 3-4's drawing: a line from query `i` (left) to key `j` (right)
    per head, its opacity the weight."""
    from matplotlib.collections import LineCollection  # noqa: PLC0415

    palette = [f"C{h % 10}" for h in range(maps.shape[0])]  # matplotlib's cycle: a colour per head
    for head, weights in enumerate(maps):
        queries, keys = np.nonzero(weights >= LINE_THRESHOLD)
        segments = [[(0.0, q), (1.0, k)] for q, k in zip(queries, keys)]
        lines = LineCollection(segments, colors=palette[head], linewidths=1.5)
        lines.set_alpha(weights[queries, keys].clip(0, 1))
        axes.add_collection(lines)
    for i, token in enumerate(tokens):
        axes.text(-0.03, i, token, ha="right", va="center", fontsize=8)
        axes.text(1.03, i, token, ha="left", va="center", fontsize=8)
    axes.set_xlim(-0.6, 1.6)
    axes.set_ylim(len(tokens) - 0.5, -0.5)
    axes.axis("off")


def _finish(figure, path):
    if path is not None:
        save_figure(figure, path)
    return figure
