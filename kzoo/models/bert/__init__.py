"""BERT (Devlin et al., 2019)."""

from kzoo.models.bert.bert_backbone import BertBackbone
from kzoo.models.bert.bert_bio_tags import entity_f1
from kzoo.models.bert.bert_classifier import BertClassifier
from kzoo.models.bert.bert_feature_extractor import BertFeatureExtractor
from kzoo.models.bert.bert_masked_lm_head import BertMaskedLMHead
from kzoo.models.bert.bert_multiple_choice import BertMultipleChoice
from kzoo.models.bert.bert_multiple_choice_preprocessor import BertMultipleChoicePreprocessor
from kzoo.models.bert.bert_optimizer import (
    BertAdamW,
    LinearWarmupLinearDecay,
    bert_finetuning_optimizer,
    bert_pretraining_optimizer,
    pretraining_phases,
)
from kzoo.models.bert.bert_preprocessor import BertPreprocessor
from kzoo.models.bert.bert_pretrainer import BertMaskedLM, BertPretrainer
from kzoo.models.bert.bert_question_answerer import BertQuestionAnswerer
from kzoo.models.bert.bert_question_answerer_preprocessor import BertQuestionAnswererPreprocessor
from kzoo.models.bert.bert_reranker import BertReranker
from kzoo.models.bert.bert_squad_metrics import squad_metrics
from kzoo.models.bert.bert_text_embedder import BertTextEmbedder
from kzoo.models.bert.bert_token_classifier import BertTokenClassifier
from kzoo.models.bert.bert_token_classifier_preprocessor import BertTokenClassifierPreprocessor
from kzoo.models.bert.bert_tokenizer import BertTokenizer

__all__ = [
    "BertAdamW",
    "BertBackbone",
    "BertClassifier",
    "BertFeatureExtractor",
    "BertMaskedLM",
    "BertMultipleChoice",
    "BertMultipleChoicePreprocessor",
    "BertMaskedLMHead",
    "BertPreprocessor",
    "BertPretrainer",
    "BertQuestionAnswerer",
    "BertQuestionAnswererPreprocessor",
    "BertReranker",
    "BertTextEmbedder",
    "BertTokenClassifier",
    "BertTokenClassifierPreprocessor",
    "BertTokenizer",
    "LinearWarmupLinearDecay",
    "bert_finetuning_optimizer",
    "bert_pretraining_optimizer",
    "entity_f1",
    "pretraining_phases",
    "squad_metrics",
]
