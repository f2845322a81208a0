"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017):
encoder-decoder model, Table 3 presets, training recipe, beam search, BLEU."""

from kzoo.models.transformer.beam_search import beam_search, gnmt_length_penalty, greedy_search
from kzoo.models.transformer.checkpoint_averaging import CheckpointAveraging, average_checkpoints
from kzoo.models.transformer.transformer import Transformer
from kzoo.models.transformer.transformer_loss import (
    LabelSmoothedCrossEntropy,
    MaskedAccuracy,
    TokenPerplexity,
)
from kzoo.models.transformer.transformer_optimizer import TransformerAdam, transformer_optimizer
from kzoo.models.transformer.transformer_parameters import transformer_parameter_count
from kzoo.models.transformer.transformer_preprocessor import TransformerPreprocessor
from kzoo.models.transformer.transformer_schedule import TransformerSchedule
from kzoo.models.transformer.transformer_tokenizer import TransformerTokenizer
from kzoo.models.transformer.transformer_translation import translate
from kzoo.models.transformer.translation_metrics import BleuScore, corpus_bleu, perplexity

__all__ = [
    "BleuScore",
    "CheckpointAveraging",
    "LabelSmoothedCrossEntropy",
    "MaskedAccuracy",
    "TokenPerplexity",
    "Transformer",
    "TransformerAdam",
    "TransformerPreprocessor",
    "TransformerSchedule",
    "TransformerTokenizer",
    "average_checkpoints",
    "beam_search",
    "corpus_bleu",
    "gnmt_length_penalty",
    "greedy_search",
    "perplexity",
    "transformer_optimizer",
    "transformer_parameter_count",
    "translate",
]
