"""Named presets: the BERT paper's configurations (PAPERS.md, BERT sec. 3 and
Table 6), the compact BERTs and the other released BERTs, their descriptions,
overrides and errors (built with `load_weights=False`: no download; the
released weights are tests/presets/test_released.py's)."""

import warnings

import pytest

import kzoo
from kzoo import BertBackbone
from kzoo.presets import get_preset

# name: (vocabulary size, L, H, A, lower-cased). Written from the papers, not from the
# JSON files: BERT sec. 3 (BASE, LARGE; uncased vocabulary 30522, cased 28996), BERT
# Table 6 (L/H/A: 3/768/12, 6/768/3, 6/768/12, 12/768/12, 12/1024/16, 24/1024/16), the
# compact models of Turc et al. 2019 (google-research/bert: TINY 2/128, MINI 4/256,
# SMALL 4/512, MEDIUM 8/512, with A = H / 64), google-research/bert's multilingual.md
# (multilingual cased: 119547 tokens; Chinese: 21128, not lower-cased) and
# sentence-transformers' all-MiniLM-L6-v2 (6 layers, H=384, 12 heads, uncased).
BERT_PRESETS = {
    "bert_base_uncased": (30522, 12, 768, 12, True),
    "bert_base_cased": (28996, 12, 768, 12, False),
    "bert_large_uncased": (30522, 24, 1024, 16, True),
    "bert_large_cased": (28996, 24, 1024, 16, False),
    "bert_l3_h768_a12": (30522, 3, 768, 12, True),
    "bert_l6_h768_a3": (30522, 6, 768, 3, True),
    "bert_l6_h768_a12": (30522, 6, 768, 12, True),
    "bert_l12_h768_a12": (30522, 12, 768, 12, True),
    "bert_l12_h1024_a16": (30522, 12, 1024, 16, True),
    "bert_l24_h1024_a16": (30522, 24, 1024, 16, True),
    "bert_tiny": (30522, 2, 128, 2, True),
    "bert_mini": (30522, 4, 256, 4, True),
    "bert_small": (30522, 4, 512, 8, True),
    "bert_medium": (30522, 8, 512, 8, True),
    "bert_base_multilingual_cased": (119547, 12, 768, 12, False),
    "bert_base_chinese": (21128, 12, 768, 12, False),
    "all_minilm_l6_v2": (30522, 6, 384, 12, True),
}


def build_quietly(preset, **overrides):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # load_weights=False: random weights, no warning
        return BertBackbone.from_preset(preset, load_weights=False, **overrides)


def test_list_presets_has_the_bert_presets():
    everything = kzoo.list_presets()
    bert = kzoo.list_presets("bert")
    assert set(BERT_PRESETS) <= set(everything)
    assert set(bert) == set(BERT_PRESETS)
    assert len(bert) == 17
    assert list(everything) == sorted(everything)
    assert all(everything[name] == info for name, info in bert.items())
    assert kzoo.list_presets("no_such_family") == {}


@pytest.mark.parametrize("name", sorted(BERT_PRESETS))
def test_description_is_one_line(name):
    description = kzoo.list_presets()[name].description
    assert isinstance(description, str)
    assert description == description.strip()
    assert "\n" not in description
    assert 20 <= len(description) <= 200
    vocabulary, L, H, A, lowercase = BERT_PRESETS[name]
    # The description names the sizes it describes.
    assert f"L={L}" in description and f"H={H}" in description and f"A={A}" in description
    assert ("uncased" in description) == lowercase
    if name.endswith("_cased"):
        assert " cased " in description
    if name.startswith(("bert_base", "bert_large")) or not lowercase:
        assert f"{vocabulary}-token" in description


@pytest.mark.parametrize("name", sorted(BERT_PRESETS))
def test_preset_config_matches_the_paper(name):
    vocabulary, L, H, A, lowercase = BERT_PRESETS[name]
    preset = get_preset(name)
    assert preset["name"] == name
    assert preset["family"] == "bert"
    assert preset["class_name"] == "BertBackbone"
    assert preset["paper"]
    config = preset["config"]
    assert config == {
        "vocabulary_size": vocabulary,
        "num_layers": L,
        "num_heads": A,
        "hidden_dim": H,
        "intermediate_dim": 4 * H,  # the FFN size is 4H (sec. 3)
        "dropout": 0.1,  # "dropout probability of 0.1 on all layers" (A.2)
        "max_sequence_length": 512,
        "num_segments": 2,
        "activation": "gelu",  # exact erf GELU, as the released checkpoints
        "layer_norm_epsilon": 1e-12,
    }
    assert H % A == 0
    assert preset["tokenizer"] == {"class_name": "BertTokenizer", "lowercase": lowercase}


def test_from_preset_builds_the_config():
    backbone = build_quietly("bert_tiny")
    assert isinstance(backbone, BertBackbone)
    vocabulary, L, H, A, _ = BERT_PRESETS["bert_tiny"]
    sizes = (backbone.vocabulary_size, backbone.num_layers, backbone.hidden_dim, backbone.num_heads)
    assert sizes == (vocabulary, L, H, A)
    assert backbone.intermediate_dim == 4 * H
    assert backbone.max_sequence_length == 512 and backbone.num_segments == 2
    assert backbone.position_embedding.position_embeddings.shape == (512, H)
    assert len(backbone.transformer_layers) == L


def test_from_preset_applies_overrides():
    # bert_tiny: on torch, Keras infers a mixed_bfloat16 model's shapes by
    # running it in bfloat16 on the CPU (its meta-device pass fails under
    # mixed precision), 80 s for bert_mini on 2 cores, 8 s for bert_tiny.
    backbone = build_quietly(
        "bert_tiny",
        max_sequence_length=64,
        vocabulary_size=1000,
        dropout=0.0,
        activation="gelu_approximate",
        dtype="mixed_bfloat16",
        name="my_bert",
    )
    config = backbone.get_config()
    assert config["max_sequence_length"] == 64
    assert config["vocabulary_size"] == 1000
    assert config["dropout"] == 0.0
    assert config["activation"] == "gelu_approximate"
    assert config["num_layers"] == 2 and config["hidden_dim"] == 128  # untouched
    assert backbone.name == "my_bert"
    assert backbone.token_embedding.embeddings.shape == (1000, 128)
    assert backbone.position_embedding.position_embeddings.shape == (64, 128)
    assert backbone.token_embedding.dtype_policy.name == "mixed_bfloat16"
    # The preset data itself is not modified by an override.
    assert get_preset("bert_tiny")["config"]["max_sequence_length"] == 512
    assert build_quietly("bert_tiny").max_sequence_length == 512


def test_unknown_override_raises():
    with pytest.raises(ValueError, match=r"Unknown override.*'num_layer'.*bert_tiny"):
        build_quietly("bert_tiny", num_layer=3)
    with pytest.raises(ValueError, match=r"num_layers"):  # lists the accepted fields
        build_quietly("bert_tiny", hidden_size=64)
    # Loading the released weights checks the names too, before any download.
    with pytest.raises(ValueError, match=r"Unknown override.*'num_layer'.*bert_tiny"):
        BertBackbone.from_preset("bert_tiny", num_layer=3)


def test_unknown_name_suggests_close_matches():
    with pytest.raises(ValueError, match=r"'bert_bsae_uncased'. Did you mean: 'bert_base_uncased'"):
        BertBackbone.from_preset("bert_bsae_uncased")
    with pytest.raises(ValueError, match=r"'bert_large_cased'"):
        get_preset("bert_lrage_cased")
    with pytest.raises(ValueError, match=r"Unknown preset 'bert-tiny'.*'bert_tiny'"):
        get_preset("bert-tiny")
    # With nothing close, the error lists the known presets.
    with pytest.raises(ValueError, match=r"Known presets: .*bert_base_uncased"):
        get_preset("resnet50")


def test_architecture_only_name_warns_that_its_weights_are_random():
    with pytest.warns(UserWarning, match=r"'bert_l3_h768_a12' is architecture only: no released weights.*random weights"):
        backbone = BertBackbone.from_preset("bert_l3_h768_a12", num_layers=1, hidden_dim=64, num_heads=1,
                                            intermediate_dim=256, vocabulary_size=100)
    assert backbone.num_layers == 1


def test_unknown_name_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError):
            BertBackbone.from_preset("no_such_preset")

