"""BERT (Devlin et al., 2019)."""

from kzoo.models.bert.bert_backbone import BertBackbone
from kzoo.models.bert.bert_classifier import BertClassifier
from kzoo.models.bert.bert_masked_lm_head import BertMaskedLMHead
from kzoo.models.bert.bert_optimizer import (
    BertAdamW,
    LinearWarmupLinearDecay,
    bert_finetuning_optimizer,
    bert_pretraining_optimizer,
    pretraining_phases,
)
from kzoo.models.bert.bert_preprocessor import BertPreprocessor
from kzoo.models.bert.bert_pretrainer import BertMaskedLM, BertPretrainer
from kzoo.models.bert.bert_tokenizer import BertTokenizer

__all__ = [
    "BertAdamW",
    "BertBackbone",
    "BertClassifier",
    "BertMaskedLM",
    "BertMaskedLMHead",
    "BertPreprocessor",
    "BertPretrainer",
    "BertTokenizer",
    "LinearWarmupLinearDecay",
    "bert_finetuning_optimizer",
    "bert_pretraining_optimizer",
    "pretraining_phases",
]
