"""The front of `kzoo.presets`: `save` by role and format, and `from_preset`
reading each format it detects."""

import json

import numpy as np
import pytest

import kzoo
from kzoo import BertBackbone


def _tiny_backbone():
    return BertBackbone(vocabulary_size=6, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)


def test_save_checks_the_object_role(tmp_path):
    backbone = _tiny_backbone()
    with pytest.raises(ValueError, match=r"save_tokenizer saves a tokenizer; got a BertBackbone, which is a backbone"):
        kzoo.presets.save_tokenizer(backbone, tmp_path / "a")
    kzoo.presets.save(backbone, tmp_path / "b")  # `save` tells the roles apart
    assert json.loads((tmp_path / "b" / "metadata.json").read_text())["classes"] == {"backbone": "BertBackbone"}


def test_unknown_save_format_lists_the_known_ones(tmp_path):
    with pytest.raises(ValueError, match=r"Unknown preset format 'onnx': save_to_preset writes \['kzoo', 'huggingface'\]"):
        _tiny_backbone().save_to_preset(tmp_path / "x", format="onnx")
    assert not (tmp_path / "x").exists()


def test_each_format_is_detected_and_read_back(tmp_path):
    backbone = _tiny_backbone()
    backbone.save_to_preset(tmp_path / "kzoo")
    backbone.save_to_preset(tmp_path / "hf", format="huggingface")
    (tmp_path / "google").mkdir()
    (tmp_path / "google" / "bert_config.json").write_text("{}")
    (tmp_path / "google" / "config.json").write_text('{"model_type": "bert"}')  # google-research's wins
    found = {name: kzoo.presets.detect_format(tmp_path / name) for name in ("kzoo", "hf", "google")}
    assert found == {"kzoo": "kzoo", "hf": "huggingface", "google": "google"}
    assert kzoo.presets.detect_format("kaggle://keras/bert/keras/bert_tiny_en_uncased/2") == "keras_hub"
    for name in ("kzoo", "hf"):
        restored = BertBackbone.from_preset(tmp_path / name)
        assert np.array_equal(restored.pooled_dense.kernel, backbone.pooled_dense.kernel), name
