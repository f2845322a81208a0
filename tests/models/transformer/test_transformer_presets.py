"""The Transformer presets: one per Table 3 row of "Attention Is All You Need"
(PAPERS.md), their configs, descriptions and parameter counts.

Every preset's `count_params()` is checked against the closed form of
`transformer_parameters`. Building all 20 at full size would initialise about
1.6 billion parameters per backend; instead the base model is built at full
size, and every distinct architecture is built with N = 1, a 64-token
vocabulary and 64 positions (the per-layer shapes stay the preset's), which
checks every per-layer term; the closed form's dependence on N and the
vocabulary is checked by the full base model and by hand-computed differences.
"""

import gc
import warnings

import keras
import pytest

import kzoo
from kzoo.models.transformer.transformer import Transformer
from kzoo.models.transformer.transformer_parameters import (
    PAPER_PARAMETERS_MILLIONS,
    TABLE_3_PRESETS,
    format_parameter_table,
    parameter_table,
    transformer_parameter_count,
)
from kzoo.presets import get_preset

# name: (N, d_model, d_ff, h, d_k, d_v, P_drop, ε_ls, positions), from Table 3
# (blank entries are the base model's), not from the JSON files.
TABLE_3 = {
    "transformer_base": (6, 512, 2048, 8, None, None, 0.1, 0.1, "sinusoidal"),
    "transformer_a_h1": (6, 512, 2048, 1, None, None, 0.1, 0.1, "sinusoidal"),
    "transformer_a_h4": (6, 512, 2048, 4, None, None, 0.1, 0.1, "sinusoidal"),
    "transformer_a_h16": (6, 512, 2048, 16, None, None, 0.1, 0.1, "sinusoidal"),
    "transformer_a_h32": (6, 512, 2048, 32, None, None, 0.1, 0.1, "sinusoidal"),
    "transformer_b_dk16": (6, 512, 2048, 8, 16, 64, 0.1, 0.1, "sinusoidal"),
    "transformer_b_dk32": (6, 512, 2048, 8, 32, 64, 0.1, 0.1, "sinusoidal"),
    "transformer_c_n2": (2, 512, 2048, 8, None, None, 0.1, 0.1, "sinusoidal"),
    "transformer_c_n4": (4, 512, 2048, 8, None, None, 0.1, 0.1, "sinusoidal"),
    "transformer_c_n8": (8, 512, 2048, 8, None, None, 0.1, 0.1, "sinusoidal"),
    "transformer_c_dmodel256": (6, 256, 2048, 8, None, None, 0.1, 0.1, "sinusoidal"),
    "transformer_c_dmodel1024": (6, 1024, 2048, 8, None, None, 0.1, 0.1, "sinusoidal"),
    "transformer_c_dff1024": (6, 512, 1024, 8, None, None, 0.1, 0.1, "sinusoidal"),
    "transformer_c_dff4096": (6, 512, 4096, 8, None, None, 0.1, 0.1, "sinusoidal"),
    "transformer_d_dropout0": (6, 512, 2048, 8, None, None, 0.0, 0.1, "sinusoidal"),
    "transformer_d_dropout0_2": (6, 512, 2048, 8, None, None, 0.2, 0.1, "sinusoidal"),
    "transformer_d_ls0": (6, 512, 2048, 8, None, None, 0.1, 0.0, "sinusoidal"),
    "transformer_d_ls0_2": (6, 512, 2048, 8, None, None, 0.1, 0.2, "sinusoidal"),
    "transformer_e_learned_positions": (6, 512, 2048, 8, None, None, 0.1, 0.1, "learned"),
    "transformer_big": (6, 1024, 4096, 16, None, None, 0.3, 0.1, "sinusoidal"),
}
# Table 3's d_k = d_v for the rows that list them (d_model / h otherwise).
TABLE_3_HEAD_SIZES = {
    "transformer_base": (64, 64), "transformer_a_h1": (512, 512), "transformer_a_h4": (128, 128),
    "transformer_a_h16": (32, 32), "transformer_a_h32": (16, 16), "transformer_b_dk16": (16, 64),
    "transformer_b_dk32": (32, 64), "transformer_c_dmodel256": (32, 32),
    "transformer_c_dmodel1024": (128, 128), "transformer_big": (64, 64),
}
SMALL = dict(num_layers=1, vocabulary_size=64, max_sequence_length=64)


def build_quietly(name, **overrides):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # random weights
        return Transformer.from_preset(name, **overrides)


def architecture(config):
    """What the parameter count depends on (dropout and ε_ls do not change it)."""
    return tuple(sorted((k, v) for k, v in config.items() if k not in ("dropout", "label_smoothing")))


def distinct_architectures():
    chosen = {}
    for name in TABLE_3_PRESETS:
        chosen.setdefault(architecture(get_preset(name)["config"]), name)
    return list(chosen.values())


# 1. The presets and their configs ---------------------------------------------


def test_every_table_3_row_has_a_preset():
    names = kzoo.list_presets("transformer")
    assert set(names) == set(TABLE_3) == set(TABLE_3_PRESETS)
    assert len(names) == 20


@pytest.mark.parametrize("name", sorted(TABLE_3))
def test_preset_config_matches_table_3(name):
    n, d_model, d_ff, h, d_k, d_v, dropout, smoothing, positions = TABLE_3[name]
    preset = get_preset(name)
    assert (preset["family"], preset["class_name"]) == ("transformer", "Transformer")
    assert preset["paper"].startswith("Table 3")
    assert preset["config"] == {
        "vocabulary_size": 37000, "num_layers": n, "hidden_dim": d_model, "intermediate_dim": d_ff,
        "num_heads": h, "key_dim": d_k, "value_dim": d_v, "dropout": dropout,
        "label_smoothing": smoothing, "position_encoding": positions, "max_sequence_length": 1024,
        "activation": "relu", "layer_norm_epsilon": 1e-6, "padding_id": 0, "start_id": 2, "end_id": 3,
    }
    description = preset["description"]
    assert description == description.strip() and "\n" not in description and len(description) <= 200
    assert "37000-token" in description


def test_table_rows_list_the_paper_head_sizes():
    rows = {row["preset"]: row for row in parameter_table()}
    assert [row["preset"] for row in parameter_table()] == list(TABLE_3_PRESETS)
    for name, (d_k, d_v) in TABLE_3_HEAD_SIZES.items():
        assert (rows[name]["d_k"], rows[name]["d_v"]) == (d_k, d_v), name


def test_from_preset_builds_with_overrides_and_warns():
    with pytest.warns(UserWarning, match="random weights"):
        model = Transformer.from_preset("transformer_big", **SMALL, hidden_dim=32, intermediate_dim=64)
    assert (model.num_heads, model.dropout, model.hidden_dim) == (16, 0.3, 32)


@pytest.mark.parametrize(
    "name,message",
    [
        ("transformer_bsae", "Unknown preset 'transformer_bsae'. Did you mean: 'transformer_base'"),
        ("transformer_c_n3", "Unknown preset 'transformer_c_n3'. Did you mean: 'transformer_c_n8', 'transformer_c_n4', 'transformer_c_n2'"),
        ("bert_tiny", "describes a BertBackbone, not a Transformer"),
    ],
)
def test_unknown_preset_names_raise(name, message):
    with pytest.raises(ValueError, match=message):
        Transformer.from_preset(name)


def test_unknown_override_raises():
    with pytest.raises(ValueError, match=r"Unknown override\(s\) \['layers'\]"):
        Transformer.from_preset("transformer_base", layers=2)


# 2. Parameter counts ---------------------------------------------------------------


def test_closed_form_by_hand():
    """Base: 37000·512 embeddings + 6 encoder layers of 3,152,384 + 6 decoder
    layers of 4,204,032 (PAPERS.md: 63.1M with the tied 37000 vocabulary)."""
    attention = 4 * (512 * 512 + 512)
    feed_forward = 2 * 512 * 2048 + 2048 + 512
    assert attention + feed_forward + 2 * 1024 == 3_152_384
    assert 2 * attention + feed_forward + 3 * 1024 == 4_204_032
    base = transformer_parameter_count(get_preset("transformer_base")["config"])
    assert base == 37000 * 512 + 6 * 3_152_384 + 6 * 4_204_032 == 63_082_496
    assert transformer_parameter_count(get_preset("transformer_big")["config"]) == 214_245_376
    # Row B: d_k 64 -> 16 shrinks W^Q and W^K (with biases) in all 18 attention layers.
    dk16 = transformer_parameter_count(get_preset("transformer_b_dk16")["config"])
    assert base - dk16 == 18 * 2 * (512 * 8 * 48 + 8 * 48)
    # Row E: two 1024 × 512 position tables.
    learned = transformer_parameter_count(get_preset("transformer_e_learned_positions")["config"])
    assert learned - base == 2 * 1024 * 512
    # Row A keeps h · d_k = 512: the count does not change.
    assert {transformer_parameter_count(get_preset(f"transformer_a_h{h}")["config"]) for h in (1, 4, 16, 32)} == {base}


def test_counts_are_close_to_the_papers_rounded_figures():
    """Within 4.2M of Table 3 where it gives a figure: the paper's exact
    vocabulary is not given (about 2M below on the base model, PAPERS.md)."""
    for row in parameter_table():
        paper = PAPER_PARAMETERS_MILLIONS.get(row["preset"])
        if paper is not None:
            assert abs(row["params"] / 1e6 - paper) < 4.2, row
    table = format_parameter_table()
    assert "| transformer_base | 6 | 512 | 2048 | 8 | 64 | 64 | sinusoidal | 63,082,496 (63.1M) | 65M |" in table
    assert "| transformer_big | 6 | 1024 | 4096 | 16 | 64 | 64 | sinusoidal | 214,245,376 (214.2M) | 213M |" in table


@pytest.mark.once  # 63M weights built to be counted: the count is the same on every backend
def test_base_model_count_params():
    model = build_quietly("transformer_base")
    try:
        assert model.count_params() == 63_082_496
        assert all(keras.backend.standardize_dtype(v.dtype) == "float32" for v in model.weights)
    finally:
        del model
        keras.backend.clear_session()
        gc.collect()


def test_every_architecture_is_built():
    built = {architecture(get_preset(name)["config"]) for name in distinct_architectures()}
    assert {architecture(get_preset(name)["config"]) for name in TABLE_3_PRESETS} == built
    assert len(built) == 16  # the 4 row-D presets share the base architecture


@pytest.mark.once  # every architecture built to be counted, as above
@pytest.mark.parametrize("name", distinct_architectures())
def test_preset_count_params_equals_closed_form(name):
    model = build_quietly(name, **SMALL)
    assert model.count_params() == transformer_parameter_count({**get_preset(name)["config"], **SMALL})
