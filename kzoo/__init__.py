"""kzoo: the Transformer and BERT papers as Keras 3 models for TensorFlow, JAX and PyTorch.

Public API:

- `kzoo.layers`: attention, position encodings, feed-forward and the
  encoder/decoder blocks of "Attention Is All You Need".
- `kzoo.BertBackbone`: the BERT encoder (Devlin et al., 2019).
- `kzoo.BertTokenizer`, `kzoo.learn_wordpiece_vocabulary`: BERT's WordPiece
  tokenizer and vocabulary learner on tensorflow-text; `kzoo.BertPreprocessor`
  packs one or two segments into the backbone's inputs.
- `kzoo.list_presets()`: the papers' configurations by name.
"""

from kzoo import data, layers
from kzoo.data import learn_wordpiece_vocabulary
from kzoo.models.bert import (
    BertBackbone,
    BertPreprocessor,
    BertTokenizer,
)
from kzoo.presets import list_presets

__version__ = "0.1.0"

__all__ = [
    "BertBackbone",
    "BertPreprocessor",
    "BertTokenizer",
    "data",
    "layers",
    "learn_wordpiece_vocabulary",
    "list_presets",
]
