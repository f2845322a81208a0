"""BERT (Devlin et al., 2019)."""

from kzoo.models.bert.bert_backbone import BertBackbone
from kzoo.models.bert.bert_preprocessor import BertPreprocessor
from kzoo.models.bert.bert_tokenizer import BertTokenizer

__all__ = ["BertBackbone", "BertPreprocessor", "BertTokenizer"]
