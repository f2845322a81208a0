"""kzoo: the Transformer and BERT papers as Keras 3 models for TensorFlow, JAX and PyTorch.

Public API:

- `kzoo.layers`: attention, position encodings, feed-forward and the
  encoder/decoder blocks of "Attention Is All You Need".
- `kzoo.BertBackbone`: the BERT encoder (Devlin et al., 2019).
- `kzoo.BertTokenizer`, `kzoo.learn_wordpiece_vocabulary`: BERT's WordPiece
  tokenizer and vocabulary learner on tensorflow-text; `kzoo.BertPreprocessor`
  packs one or two segments into the backbone's inputs.
- `kzoo.tokenizers`: the generic WordPiece tokenizer that `BertTokenizer` and
  `TransformerTokenizer` subclass, word splitting, vocabulary files and learning.
- `kzoo.BertPretrainer`, `kzoo.BertMaskedLM`: pre-training (masked LM + next
  sentence prediction, or masked LM only) with `kzoo.bert_pretraining_optimizer`
  (`BertAdamW`, `LinearWarmupLinearDecay`) and `kzoo.pretraining_phases`.
- `kzoo.data`: the pre-training input pipeline on tf.data
  (`kzoo.data.pretraining_dataset`: corpora, NSP pairs, MLM masking, TFRecords).
- `kzoo.Transformer` ("Attention Is All You Need", Vaswani et al., 2017):
  the encoder-decoder with its Table 3 presets, `kzoo.TransformerTokenizer`,
  `kzoo.TransformerPreprocessor`, the training recipe
  (`kzoo.transformer_optimizer`, `kzoo.TransformerAdam`, `kzoo.TransformerSchedule`,
  `kzoo.LabelSmoothedCrossEntropy`, `kzoo.CheckpointAveraging`), greedy and
  beam search (`Transformer.generate`, `kzoo.translate` on raw text) and
  `kzoo.corpus_bleu`.
- `kzoo.BertTextEmbedder`: sentence embeddings (Sentence-BERT pooling) for
  semantic search (`kzoo.semantic_search`, `kzoo.cosine_similarity`), trained
  with `kzoo.MultipleNegativesRankingLoss` (and `kzoo.MatryoshkaLoss` for shorter vectors) on
  pairs or on triplets from `kzoo.mine_hard_negatives`; int8 and binary vectors
  (`kzoo.quantize_embeddings`, `kzoo.quantization_ranges`); retrieval metrics as sentence-transformers'
  evaluator defines them (`kzoo.retrieval_metrics`, `kzoo.evaluate_retrieval`, `kzoo.mrr_at_k`,
  `kzoo.ndcg_at_k`, `kzoo.map_at_k`, `kzoo.recall_at_k`, `kzoo.precision_at_k`,
  `kzoo.accuracy_at_k`) and `kzoo.RetrievalEvaluator`, a callback logging them each epoch;
  `kzoo.BertReranker`, a cross-encoder scoring (query, document) pairs (sentence-transformers'
  `CrossEncoder` checkpoints in and out), trained with `kzoo.RerankingLoss` (pairs or lists)
  and measured with `kzoo.RerankingAccuracy`.
- `kzoo.distribution`: data and model parallel training on existing engines
  (`keras.distribution` on JAX, `tf.distribute`, torch DDP).
- `kzoo.list_presets()`: the papers' configurations and the released BERTs by
  name (parameter counts, where the weights come from); every model's
  `save_to_preset(path)` / `from_preset(name or path)` (`kzoo.presets`).
- `kzoo.BestPreset`: a callback keeping the best epoch of a `fit` as a preset
  directory (atomic saves), beside Keras' `EarlyStopping(restore_best_weights=True)`.
- `kzoo.checkpoints`: BERT checkpoints of Hugging Face, google-research and
  KerasHub, which `from_preset` reads (and `save_to_preset` writes for Hugging Face).
"""

from kzoo import checkpoints as checkpoints  # the formats `from_preset` reads
from kzoo.callbacks import BestPreset, RetrievalEvaluator
from kzoo import data, distribution, layers
from kzoo.tokenizers.wordpiece_vocabulary import learn_wordpiece_vocabulary
from kzoo.models.bert import (
    BertAdamW,
    BertBackbone,
    BertClassifier,
    BertFeatureExtractor,
    BertMaskedLM,
    BertMultipleChoice,
    BertMultipleChoicePreprocessor,
    BertPreprocessor,
    BertPretrainer,
    BertQuestionAnswerer,
    BertQuestionAnswererPreprocessor,
    BertReranker,
    BertTextEmbedder,
    BertTokenClassifier,
    BertTokenClassifierPreprocessor,
    BertTokenizer,
    LinearWarmupLinearDecay,
    bert_finetuning_optimizer,
    bert_pretraining_optimizer,
    entity_f1,
    pretraining_phases,
    squad_metrics,
)
from kzoo.models.transformer import (
    CheckpointAveraging,
    LabelSmoothedCrossEntropy,
    Transformer,
    TransformerAdam,
    TransformerPreprocessor,
    TransformerSchedule,
    TransformerTokenizer,
    average_checkpoints,
    corpus_bleu,
    perplexity,
    transformer_optimizer,
    translate,
)
from kzoo.models.embedding_quantization import quantization_ranges, quantize_embeddings
from kzoo.models.embeddings import MatryoshkaLoss, MultipleNegativesRankingLoss, cosine_similarity, semantic_search
from kzoo.models.hard_negatives import mine_hard_negatives
from kzoo.models.retrieval_metrics import (
    accuracy_at_k,
    evaluate_retrieval,
    map_at_k,
    mrr_at_k,
    ndcg_at_k,
    precision_at_k,
    recall_at_k,
    retrieval_metrics,
)
from kzoo.models.reranking_losses import RerankingAccuracy, RerankingLoss
from kzoo.presets import list_presets
from kzoo import progress as progress
from kzoo import visualize  # matplotlib is imported when a picture is drawn
from kzoo.version import __version__ as __version__

__all__ = [
    "BertAdamW",
    "BertBackbone",
    "BertClassifier",
    "BertFeatureExtractor",
    "BertMaskedLM",
    "BertMultipleChoice",
    "BertMultipleChoicePreprocessor",
    "BertPreprocessor",
    "BertPretrainer",
    "BertQuestionAnswerer",
    "BertQuestionAnswererPreprocessor",
    "BertReranker",
    "BertTextEmbedder",
    "BertTokenClassifier",
    "BertTokenClassifierPreprocessor",
    "BertTokenizer",
    "BestPreset",
    "CheckpointAveraging",
    "LabelSmoothedCrossEntropy",
    "LinearWarmupLinearDecay",
    "MatryoshkaLoss",
    "MultipleNegativesRankingLoss",
    "RerankingAccuracy",
    "RerankingLoss",
    "RetrievalEvaluator",
    "Transformer",
    "TransformerAdam",
    "TransformerPreprocessor",
    "TransformerSchedule",
    "TransformerTokenizer",
    "accuracy_at_k",
    "average_checkpoints",
    "bert_finetuning_optimizer",
    "bert_pretraining_optimizer",
    "corpus_bleu",
    "cosine_similarity",
    "data",
    "distribution",
    "entity_f1",
    "evaluate_retrieval",
    "layers",
    "learn_wordpiece_vocabulary",
    "list_presets",
    "map_at_k",
    "mine_hard_negatives",
    "mrr_at_k",
    "ndcg_at_k",
    "perplexity",
    "precision_at_k",
    "pretraining_phases",
    "quantization_ranges",
    "quantize_embeddings",
    "recall_at_k",
    "retrieval_metrics",
    "semantic_search",
    "squad_metrics",
    "transformer_optimizer",
    "translate",
    "visualize",
]
