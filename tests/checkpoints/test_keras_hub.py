"""KerasHub BERT presets (BERT sec. 3): a tiny `keras_hub.models.BertBackbone`
saved with `save_to_preset`, loaded into kzoo and compared in the same process."""

import json
import sys

import keras
import keras_hub
import numpy as np
import pytest

import kzoo
from kzoo.presets import detect_format
from tests.models.bert import checkpoint_fixtures as fx

TOLERANCE = 1e-4
# Text on which KerasHub's uncased tokenizer (lower-case, accents kept, NFKC
# case folding) and BERT's agree once accents are kept.
SENTENCES = [s for s in fx.SENTENCES if "Café" not in s] + ["cafe caf", "the café"]


@pytest.fixture(scope="module")
def preset(tmp_path_factory):
    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(fx.UNCASED), num_layers=2, num_heads=2, hidden_dim=32,
        intermediate_dim=64, max_sequence_length=40,
    )
    rng = np.random.RandomState(0)
    for variable in backbone.weights:  # every weight random, LayerNorm and biases included
        variable.assign(rng.normal(size=variable.shape).astype("float32") * 0.2 + 0.05)
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=fx.UNCASED + ["café"], lowercase=True)
    directory = tmp_path_factory.mktemp("keras_hub") / "bert"
    backbone.save_to_preset(directory)
    tokenizer.save_to_preset(directory)
    return backbone, tokenizer, directory


def test_backbone_matches_keras_hub(preset):
    reference, _, directory = preset
    backbone = kzoo.BertBackbone.from_preset(directory)
    assert backbone.activation == "gelu_approximate"  # KerasHub's encoder GELU
    features, _ = fx.inputs(len(fx.UNCASED))
    expected = {k: keras.ops.convert_to_numpy(v) for k, v in reference(features).items()}
    differences = fx.max_differences(expected, backbone(features), features["padding_mask"])
    print(f"KerasHub preset on {keras.backend.backend()}: max |kzoo - keras_hub| {differences}")
    assert set(differences) == {"sequence_output", "pooled_output"}
    assert max(differences.values()) < TOLERANCE, differences


def test_preset_kinds_are_told_apart(preset, tmp_path):
    _, _, directory = preset
    assert detect_format(directory) == "keras_hub"
    kzoo.BertBackbone.from_preset(directory).save_to_preset(tmp_path / "kzoo")
    assert detect_format(tmp_path / "kzoo") == "kzoo"


@pytest.mark.backend_independent
def test_tokenizer_matches_keras_hub(preset):
    _, reference, directory = preset
    tokenizer = kzoo.BertTokenizer.from_preset(directory)
    assert (tokenizer.lowercase, tokenizer.strip_accents) == (True, False)  # KerasHub keeps accents
    expected = [np.asarray(reference(s)).tolist() for s in SENTENCES]
    assert tokenizer(SENTENCES).to_list() == expected
    ids = [i for sentence in expected for i in sentence]
    assert len(set(ids)) >= 20 and ids.count(tokenizer.unknown_token_id) <= len(ids) // 10
    assert tokenizer("the café").numpy().tolist() == [fx.UNCASED.index("the"), len(fx.UNCASED)]


def test_other_keras_hub_models_are_refused(preset, tmp_path):
    _, _, directory = preset
    config = json.loads((directory / "config.json").read_text())
    config["registered_name"] = "keras_hub>DistilBertBackbone"
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"holds a KerasHub 'keras_hub>DistilBertBackbone'; kzoo reads"):
        kzoo.BertBackbone.from_preset(tmp_path)


def test_without_keras_hub_the_error_says_what_to_install(preset, monkeypatch):
    _, _, directory = preset
    monkeypatch.setitem(sys.modules, "keras_hub", None)  # keras-hub is an optional dependency
    with pytest.raises(ImportError, match=r"is a KerasHub preset.*pip install \"kzoo\[keras-hub\]\""):
        kzoo.BertBackbone.from_preset(directory)
