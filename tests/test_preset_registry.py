"""The preset format registry: `import kzoo` registers the checkpoint formats,
`from_preset` asks the registry which format reads a path, and
`save_to_preset(format=...)` writes through it."""

import json
import subprocess
import sys

import pytest

import kzoo
from kzoo import presets

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"]


def _tiny_backbone():
    return kzoo.BertBackbone(vocabulary_size=len(VOCABULARY), num_layers=1, num_heads=2,
                             hidden_dim=8, intermediate_dim=16)


@pytest.fixture
def text_format():
    """A toy format: a directory with `tokens.txt` is a tokenizer's vocabulary."""
    def detect(path):
        return (path / "tokens.txt").is_file() if hasattr(path, "is_file") else False

    def load(cls, path, /, **kwargs):
        return cls((path / "tokens.txt").read_text().split(), **kwargs)

    def export(obj, path):
        path.mkdir(parents=True, exist_ok=True)
        (path / "tokens.txt").write_text("\n".join(obj.get_vocabulary()))

    presets.register_format("tokens_txt", detect=detect, load=load, export=export)
    yield "tokens_txt"
    presets.unregister_format("tokens_txt")


@pytest.mark.backend_independent  # checked under one backend (tests/conftest.py)
def test_importing_kzoo_registers_every_format():
    code = "import kzoo; print(kzoo.presets.format_names())"  # a fresh process: nothing else imported
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "['kzoo', 'google', 'huggingface', 'keras_hub']"
    assert presets.format_names("export") == ["kzoo", "huggingface"]


@pytest.mark.backend_independent
def test_from_preset_and_save_to_preset_go_through_the_registry(tmp_path, text_format):
    tokenizer = kzoo.BertTokenizer(VOCABULARY)
    presets.save(tokenizer, tmp_path / "exported", format=text_format)
    assert (tmp_path / "exported" / "tokens.txt").read_text().split() == VOCABULARY
    assert presets.detect_format(tmp_path / "exported") == text_format
    restored = kzoo.BertTokenizer.from_preset(tmp_path / "exported", lowercase=False)
    assert restored.get_vocabulary() == VOCABULARY and restored.lowercase is False


def test_save_checks_the_object_role(tmp_path):
    backbone = _tiny_backbone()
    with pytest.raises(ValueError, match=r"save_tokenizer saves a tokenizer; got a BertBackbone, which is a backbone"):
        presets.save_tokenizer(backbone, tmp_path / "a")
    presets.save(backbone, tmp_path / "b")  # `save` tells the roles apart
    assert json.loads((tmp_path / "b" / "metadata.json").read_text())["classes"] == {"backbone": "BertBackbone"}


def test_unknown_formats_list_the_known_ones(tmp_path):
    with pytest.raises(ValueError, match=r"Unknown preset format 'onnx': save_to_preset writes \['kzoo', 'huggingface'\]"):
        presets.save(_tiny_backbone(), tmp_path, format="onnx")
    with pytest.raises(ValueError, match=r"Unknown preset format 'onnx': kzoo reads \['kzoo', 'google', 'huggingface', 'keras_hub'\]"):
        presets.get_format("onnx", "load")
