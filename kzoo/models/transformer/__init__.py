"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017):
encoder-decoder model, Table 3 presets, training recipe, beam search, BLEU."""
