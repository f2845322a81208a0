"""BERT (Devlin et al., 2019)."""

from kzoo.models.bert.bert_backbone import BertBackbone

__all__ = ["BertBackbone"]
