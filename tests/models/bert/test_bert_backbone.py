"""BertBackbone (BERT sec. 3): parity with a float64 numpy reference, across
backends, parameter counts of every preset, padding, attention probabilities,
serialization, mixed precision, input errors and a training step.

Every test runs on the backend of the session (KERAS_BACKEND); the suite is
run once per backend.
"""

import json

import keras
import numpy as np
import pytest
from keras import ops

from kzoo import BertBackbone
from kzoo.presets import get_preset, list_presets
from tests.models.bert import numpy_bert
from tests.models.bert.cross_backend_script import run_on_other_backend
from tests.test_case import run_preset_test

TINY = dict(
    vocabulary_size=50,
    num_layers=2,
    num_heads=2,
    hidden_dim=16,
    intermediate_dim=64,
    max_sequence_length=32,
)
PARITY_ATOL = 1e-5  # float32 model vs float64 reference


def to_numpy(x):
    return ops.convert_to_numpy(x)


def padded_batch(length=9):
    """Three examples: full length; one sentence padded after 5 tokens; a
    sentence pair (segments A and B) padded after 7. Padded positions hold
    arbitrary non-zero ids, so only the mask can hide them."""
    token_ids = np.array(
        [
            [2, 11, 17, 23, 5, 41, 7, 13, 3][:length],
            [2, 31, 8, 44, 3, 49, 12, 1, 33][:length],
            [2, 9, 19, 3, 27, 36, 3, 48, 6][:length],
        ],
        dtype="int32",
    )
    segment_ids = np.array(
        [[0] * 9, [0] * 5 + [1, 0, 1, 1], [0, 0, 0, 0, 1, 1, 1, 0, 1]], dtype="int32"
    )[:, :length]
    padding_mask = np.array(
        [[1] * 9, [1] * 5 + [0] * 4, [1] * 7 + [0] * 2], dtype="int32"
    )[:, :length]
    return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}


def randomize_weights(backbone, seed=0):
    """Replaces BERT's tiny truncated-normal init (biases 0, LayerNorm 1/0) by
    O(1) random values everywhere, so that every weight, bias and LayerNorm
    parameter influences the outputs and a misplaced one shows in parity."""
    rng = np.random.default_rng(seed)
    values = []
    for v in backbone.weights:
        shape, leaf = tuple(v.shape), v.path.split("/")[-1]
        if leaf == "gamma":
            value = 1.0 + 0.2 * rng.standard_normal(shape)
        elif leaf in ("beta", "bias"):
            value = 0.2 * rng.standard_normal(shape)
        elif leaf == "embeddings":
            value = 0.5 * rng.standard_normal(shape)
        else:  # kernels: fan-in scaling keeps activations O(1)
            fan_in = int(np.prod(shape[:-1])) if "attention_output" in v.path else shape[0]
            value = rng.standard_normal(shape) / np.sqrt(fan_in)
        values.append(value.astype("float32"))
    backbone.set_weights(values)
    return backbone


def tiny_backbone(seed=0, **overrides):
    return randomize_weights(BertBackbone(**{**TINY, **overrides}), seed)


def reference(backbone, inputs, activation="gelu"):
    return numpy_bert.bert_forward(
        numpy_bert.weights_by_path(backbone), **inputs, activation=activation
    )


def max_abs_diff(a, b):
    a = np.asarray(to_numpy(a)).astype("float64")
    b = np.asarray(to_numpy(b)).astype("float64")
    return float(np.max(np.abs(a - b)))


# 1. Parity with the numpy reference ------------------------------------------


def test_weight_paths_and_shapes():
    """The variable layout the reference (and checkpoint converters) rely on."""
    backbone = BertBackbone(**TINY)
    shapes = {v.path: tuple(v.shape) for v in backbone.weights}
    assert len(shapes) == len(backbone.weights) == 5 + 16 * 2 + 2
    assert shapes["token_embedding/embeddings"] == (50, 16)
    assert shapes["position_embedding/embeddings"] == (32, 16)
    assert shapes["segment_embedding/embeddings"] == (2, 16)
    assert shapes["transformer_layer_1/self_attention/query/kernel"] == (16, 2, 8)
    assert shapes["transformer_layer_1/self_attention/value/bias"] == (2, 8)
    assert shapes["transformer_layer_1/self_attention/attention_output/kernel"] == (2, 8, 16)
    assert shapes["transformer_layer_1/feed_forward/intermediate_dense/kernel"] == (16, 64)
    assert shapes["transformer_layer_1/feed_forward/output_dense/kernel"] == (64, 16)
    assert shapes["pooled_dense/kernel"] == (16, 16)
    # BERT's initializer: truncated normal, stddev 0.02 (so |w| <= 2 * 0.02).
    table = to_numpy(backbone.token_embedding.embeddings)
    assert np.max(np.abs(table)) <= 0.04 + 1e-7
    assert 0.01 < table.std() < 0.02


def test_parity_default_call():
    backbone = tiny_backbone()
    inputs = padded_batch()
    outputs = backbone(inputs)
    expected = reference(backbone, inputs)
    assert sorted(outputs) == ["pooled_output", "sequence_output"]
    assert tuple(outputs["sequence_output"].shape) == (3, 9, 16)
    assert tuple(outputs["pooled_output"].shape) == (3, 16)
    # The reference's outputs are O(1): the tolerance below is meaningful.
    assert np.abs(expected["sequence_output"]).max() > 1.0
    assert max_abs_diff(outputs["sequence_output"], expected["sequence_output"]) <= PARITY_ATOL
    assert max_abs_diff(outputs["pooled_output"], expected["pooled_output"]) <= PARITY_ATOL


def test_parity_compiled_predict():
    """`predict` runs a compiled function (tf.function, jax.jit, torch eager
    loop): same numbers as the reference."""
    backbone = tiny_backbone()
    inputs = padded_batch()
    outputs = backbone.predict(inputs, batch_size=3, verbose=0)
    expected = reference(backbone, inputs)
    assert max_abs_diff(outputs["sequence_output"], expected["sequence_output"]) <= PARITY_ATOL
    assert max_abs_diff(outputs["pooled_output"], expected["pooled_output"]) <= PARITY_ATOL


def test_parity_return_hidden_states():
    backbone = tiny_backbone()
    inputs = padded_batch()
    outputs = backbone(inputs, return_hidden_states=True)
    expected = reference(backbone, inputs)
    assert sorted(outputs) == ["hidden_states", "pooled_output", "sequence_output"]
    hidden = outputs["hidden_states"]
    assert len(hidden) == TINY["num_layers"] + 1
    for i, (got, want) in enumerate(zip(hidden, expected["hidden_states"])):
        assert tuple(got.shape) == (3, 9, 16)
        assert max_abs_diff(got, want) <= PARITY_ATOL, f"hidden state {i}"
    np.testing.assert_array_equal(to_numpy(hidden[-1]), to_numpy(outputs["sequence_output"]))
    assert max_abs_diff(outputs["sequence_output"], expected["sequence_output"]) <= PARITY_ATOL
    assert max_abs_diff(outputs["pooled_output"], expected["pooled_output"]) <= PARITY_ATOL
    # The on-request path computes what the functional graph computes.
    default = backbone(inputs)
    assert max_abs_diff(default["sequence_output"], outputs["sequence_output"]) <= 1e-6


def test_parity_gelu_approximate():
    backbone = tiny_backbone(activation="gelu_approximate")
    inputs = padded_batch()
    outputs = backbone(inputs)
    tanh_reference = reference(backbone, inputs, activation="gelu_approximate")
    erf_reference = reference(backbone, inputs, activation="gelu")
    for key in ("sequence_output", "pooled_output"):
        assert max_abs_diff(outputs[key], tanh_reference[key]) <= PARITY_ATOL, key
    # The two GELUs are distinguishable at this tolerance: the exact-erf model
    # would fail the tanh parity above and vice versa.
    gap = max_abs_diff(outputs["sequence_output"], erf_reference["sequence_output"])
    assert gap > 1e-6
    assert gap > 10 * PARITY_ATOL, gap


def test_reference_gelus():
    """The reference's activations themselves, at known values."""
    x = np.array([-3.0, -1.0, 0.0, 0.5, 1.0, 2.0])
    # x * Phi(x), Phi the standard normal CDF (values from scipy.stats.norm.cdf).
    phi = np.array([0.0013498980, 0.1586552539, 0.5, 0.6914624613, 0.8413447461, 0.9772498681])
    np.testing.assert_allclose(numpy_bert.gelu_exact(x), x * phi, atol=1e-9)
    assert 1e-4 < np.max(np.abs(numpy_bert.gelu_tanh(x) - numpy_bert.gelu_exact(x))) < 1e-3


# 2. Cross-backend -------------------------------------------------------------


def test_weights_and_preset_load_on_another_backend(tmp_path):
    """A weights file and a preset saved on this backend give the same outputs
    on the next one (tensorflow -> jax -> torch -> tensorflow): every backend
    saves both and loads both."""
    keras.utils.set_random_seed(20240601)
    backbone = tiny_backbone(seed=7)
    inputs = padded_batch()
    outputs = backbone(inputs)
    backbone.save_weights(str(tmp_path / "w.weights.h5"))
    backbone.save_to_preset(tmp_path / "preset")
    with open(tmp_path / "config.json", "w") as f:
        json.dump(TINY, f)
    np.savez(
        tmp_path / "case.npz",
        **inputs,
        sequence_output=to_numpy(outputs["sequence_output"]).astype("float64"),
        pooled_output=to_numpy(outputs["pooled_output"]).astype("float64"),
    )

    report = run_on_other_backend(tmp_path)
    for way in ("weights", "preset"):
        assert report[way]["sequence_max_abs"] > 1.0, report  # non-trivial outputs
        assert report[way]["sequence_max_abs_diff"] <= 1e-5, report
        assert report[way]["pooled_max_abs_diff"] <= 1e-5, report


# 3. Parameter counts ----------------------------------------------------------


def closed_form_parameter_count(config):
    """BERT's parameters from its config (BERT sec. 3), written independently of kzoo."""
    V, P, S = config["vocabulary_size"], config["max_sequence_length"], config["num_segments"]
    H, F, L = config["hidden_dim"], config["intermediate_dim"], config["num_layers"]
    embeddings = V * H + P * H + S * H + 2 * H  # three tables + LayerNorm
    attention = 4 * (H * H + H)  # Q, K, V, O projections with biases
    layer_norms = 2 * 2 * H
    ffn = H * F + F + F * H + H
    pooler = H * H + H
    return embeddings + L * (attention + layer_norms + ffn) + pooler


PAPER_TOTALS = {"bert_base_uncased": 109_482_240, "bert_large_uncased": 335_141_888}


def test_closed_form_matches_paper_totals():
    for name, total in PAPER_TOTALS.items():
        assert closed_form_parameter_count(get_preset(name)["config"]) == total


def test_every_preset_is_an_architecture_the_closed_form_covers():
    """Every preset's config has BASE's fields (those the closed form reads
    among them), a head split of H, and the 4H feed-forward of sec. 3."""
    fields = set(get_preset("bert_base_uncased")["config"])
    for name in list_presets("bert"):
        config = get_preset(name)["config"]
        assert set(config) == fields, name
        assert config["hidden_dim"] % config["num_heads"] == 0, name
        assert config["intermediate_dim"] == 4 * config["hidden_dim"], name
        assert closed_form_parameter_count(config) > 4_000_000, name  # bert_tiny: 4.4M


def test_table_6_rows_of_base_and_large_are_those_models():
    assert get_preset("bert_l12_h768_a12")["config"] == get_preset("bert_base_uncased")["config"]
    assert get_preset("bert_l24_h1024_a16")["config"] == get_preset("bert_large_uncased")["config"]


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"num_layers": 3, "hidden_dim": 48, "num_heads": 4, "intermediate_dim": 80},
        {"vocabulary_size": 97, "max_sequence_length": 40, "num_segments": 3},
        {"num_layers": 1, "hidden_dim": 24, "num_heads": 3, "intermediate_dim": 24, "num_segments": 1},
    ],
)
def test_closed_form_matches_built_models(overrides):
    """The closed form counts what the code builds, each config field varied;
    with BASE built in test_bert_pretrainer.py, it stands for every preset's count, LARGE's
    335,141,888 included (building all 14 presets initialises 1.8 billion
    parameters per backend; LARGE alone 30-80 s of a test run). BASE is built
    once, with its heads, in test_bert_pretrainer.py."""
    config = {"num_segments": 2, **TINY, **overrides}
    assert BertBackbone(**config).count_params() == closed_form_parameter_count(config)


# 4. Padding invariance --------------------------------------------------------


def test_appended_padding_does_not_change_outputs():
    backbone = tiny_backbone()
    inputs = padded_batch(length=9)
    base = backbone(inputs)
    rng = np.random.default_rng(3)
    extra = 6
    longer = {
        "token_ids": np.concatenate(
            [inputs["token_ids"], rng.integers(1, 50, (3, extra), dtype="int32")], axis=1
        ),
        "segment_ids": np.concatenate(
            [inputs["segment_ids"], rng.integers(0, 2, (3, extra), dtype="int32")], axis=1
        ),
        "padding_mask": np.concatenate(
            [inputs["padding_mask"], np.zeros((3, extra), "int32")], axis=1
        ),
    }
    padded = backbone(longer)
    real = inputs["padding_mask"].astype(bool)
    got = to_numpy(padded["sequence_output"])[:, :9][real]
    want = to_numpy(base["sequence_output"])[real]
    assert max_abs_diff(got, want) <= 1e-5
    assert max_abs_diff(padded["pooled_output"], base["pooled_output"]) <= 1e-5
    # The extra positions do get different values: they are computed, then masked.
    assert max_abs_diff(padded["sequence_output"][:, 9:], padded["sequence_output"][:, 8:9]) > 1e-3


def test_padded_token_ids_are_ignored():
    """Changing the ids behind padding_mask=0 does not move real positions."""
    backbone = tiny_backbone()
    inputs = padded_batch()
    changed = dict(inputs)
    pad = inputs["padding_mask"] == 0
    changed["token_ids"] = np.where(pad, 49 - inputs["token_ids"], inputs["token_ids"])
    changed["segment_ids"] = np.where(pad, 1 - inputs["segment_ids"], inputs["segment_ids"])
    assert np.any(changed["token_ids"] != inputs["token_ids"])
    a, b = backbone(inputs), backbone(changed)
    real = ~pad
    a_real, b_real = to_numpy(a["sequence_output"])[real], to_numpy(b["sequence_output"])[real]
    assert max_abs_diff(a_real, b_real) <= 1e-5
    assert max_abs_diff(a["pooled_output"], b["pooled_output"]) <= 1e-5


def test_padding_mask_matters():
    """Control for the invariance tests: unmasking the padding changes the real positions."""
    backbone = tiny_backbone()
    inputs = padded_batch()
    unmasked = dict(inputs, padding_mask=np.ones_like(inputs["padding_mask"]))
    a, b = backbone(inputs), backbone(unmasked)
    assert max_abs_diff(a["pooled_output"][1], b["pooled_output"][1]) > 1e-3
    # Example 0 has no padding: unchanged.
    assert max_abs_diff(a["pooled_output"][0], b["pooled_output"][0]) <= 1e-6


# 5. Attention probabilities ---------------------------------------------------


def test_attention_scores():
    backbone = tiny_backbone()
    inputs = padded_batch()
    outputs = backbone(inputs, return_attention_scores=True)
    expected = reference(backbone, inputs)
    scores = outputs["attention_scores"]
    assert len(scores) == TINY["num_layers"]
    pad_keys = inputs["padding_mask"] == 0  # (B, S)
    for layer, (got, want) in enumerate(zip(scores, expected["attention_scores"])):
        got = to_numpy(got)
        assert got.shape == (3, TINY["num_heads"], 9, 9)
        np.testing.assert_allclose(got.sum(axis=-1), 1.0, atol=1e-5)
        masked = np.broadcast_to(pad_keys[:, None, None, :], got.shape)
        assert masked.sum() > 0
        assert np.max(got[masked]) < 1e-6, f"layer {layer} attends to padding"
        assert max_abs_diff(got, want) <= PARITY_ATOL, f"layer {layer}"
        # Not uniform: the test would not catch a constant-logit bug otherwise.
        assert np.max(got) > 0.3
    # Outputs are unchanged by asking for the scores.
    assert max_abs_diff(outputs["sequence_output"], expected["sequence_output"]) <= PARITY_ATOL
    both = backbone(inputs, return_attention_scores=True, return_hidden_states=True)
    assert len(both["hidden_states"]) == 3 and len(both["attention_scores"]) == 2


# 6. Serialization -------------------------------------------------------------


def test_get_config_from_config_round_trip():
    backbone = tiny_backbone(activation="gelu_approximate", dropout=0.2, num_segments=3)
    config = backbone.get_config()
    for key, value in {**TINY, "activation": "gelu_approximate", "dropout": 0.2}.items():
        assert config[key] == value, key
    assert config["num_segments"] == 3 and config["layer_norm_epsilon"] == 1e-12
    revived = BertBackbone.from_config(config)
    assert revived.get_config() == config
    assert [v.path for v in revived.weights] == [v.path for v in backbone.weights]
    revived.set_weights(backbone.get_weights())
    inputs = padded_batch()
    a, b = backbone(inputs), revived(inputs)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_array_equal(to_numpy(a[key]), to_numpy(b[key]))
    # JSON-serializable, and a dtype policy survives the round trip.
    json.dumps(config)
    mixed = BertBackbone(**TINY, dtype="mixed_bfloat16")
    revived = BertBackbone.from_config(json.loads(json.dumps(mixed.get_config())))
    assert revived.dtype_policy.name == "mixed_bfloat16"
    assert revived.get_config() == mixed.get_config()


def test_keras_save_and_load(tmp_path):
    backbone = tiny_backbone()
    inputs = padded_batch()
    expected = backbone(inputs)
    path = str(tmp_path / "bert.keras")
    backbone.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, BertBackbone)
    assert loaded.get_config() == backbone.get_config()
    outputs = loaded(inputs)
    for key in ("sequence_output", "pooled_output"):
        assert max_abs_diff(outputs[key], expected[key]) <= 1e-6, key
    # The loaded model keeps the call options and the input defaults.
    hidden = loaded(inputs, return_hidden_states=True)["hidden_states"]
    assert len(hidden) == 3
    ids = inputs["token_ids"][:1]
    assert max_abs_diff(loaded(ids)["sequence_output"], backbone(ids)["sequence_output"]) <= 1e-6


def test_keras_save_and_load_keeps_mixed_precision(tmp_path):
    backbone = tiny_backbone(dtype="mixed_bfloat16")
    inputs = padded_batch()
    expected = to_numpy(ops.cast(backbone(inputs)["sequence_output"], "float32"))
    path = str(tmp_path / "bert_bf16.keras")
    backbone.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.dtype_policy.name == "mixed_bfloat16"
    assert loaded.transformer_layers[1].feed_forward.dtype_policy.name == "mixed_bfloat16"
    output = loaded(inputs)["sequence_output"]
    assert keras.backend.standardize_dtype(output.dtype) == "bfloat16"
    assert max_abs_diff(ops.cast(output, "float32"), expected) <= 1e-6


# 7. Mixed precision -----------------------------------------------------------


@pytest.mark.parametrize("policy,atol", [("mixed_bfloat16", 0.1), ("mixed_float16", 0.02)])
def test_mixed_precision(policy, atol):
    backbone = tiny_backbone(dtype=policy)
    inputs = padded_batch()
    inputs["padding_mask"][1] = 0  # example 1 is all padding
    outputs = backbone(inputs, return_hidden_states=True, return_attention_scores=True)
    compute = policy.split("_")[1]
    assert all(keras.backend.standardize_dtype(v.dtype) == "float32" for v in backbone.weights)
    for key in ("sequence_output", "pooled_output"):
        value = outputs[key]
        assert keras.backend.standardize_dtype(value.dtype) == compute, key
        assert np.all(np.isfinite(to_numpy(ops.cast(value, "float32")))), key
    for tensor in outputs["hidden_states"] + outputs["attention_scores"]:
        assert np.all(np.isfinite(to_numpy(ops.cast(tensor, "float32"))))
    default = backbone(inputs)
    assert np.all(np.isfinite(to_numpy(ops.cast(default["sequence_output"], "float32"))))
    # Close to the float64 reference at the real positions (same float32 weights);
    # measured errors are ~0.03 (bfloat16) and ~0.004 (float16).
    expected = reference(backbone, inputs)
    real = inputs["padding_mask"].astype(bool)
    got = to_numpy(ops.cast(outputs["sequence_output"], "float32"))
    assert max_abs_diff(got[real], expected["sequence_output"][real]) <= atol
    real_rows = [0, 2]
    got_pooled = to_numpy(ops.cast(outputs["pooled_output"], "float32"))[real_rows]
    assert max_abs_diff(got_pooled, expected["pooled_output"][real_rows]) <= atol


# 8. Errors and input defaults -------------------------------------------------


def _as_backend(inputs):
    return {k: ops.convert_to_tensor(v) for k, v in inputs.items()}


@pytest.mark.parametrize("convert", [False, True], ids=["numpy", "backend_tensor"])
@pytest.mark.parametrize(
    "field,value,message",
    [
        ("token_ids", 50, r"token_embedding` ids must lie in \[0, 50\).*values from 2 to 50"),
        ("token_ids", -1, r"token_embedding` ids must lie in \[0, 50\).*values from -1 to"),
        ("segment_ids", 2, r"segment_embedding` ids must lie in \[0, 2\).*values from 0 to 2"),
        ("segment_ids", -1, r"segment_embedding` ids must lie in \[0, 2\).*values from -1 to"),
    ],
    ids=["token_too_large", "token_negative", "segment_too_large", "segment_negative"],
)
def test_out_of_range_ids_raise(field, value, message, convert):
    backbone = BertBackbone(**TINY)
    inputs = {
        "token_ids": np.array([[2, 4, 0, 3]], "int32"),
        "segment_ids": np.zeros((1, 4), "int32"),
        "padding_mask": np.ones((1, 4), "int32"),
    }
    inputs[field][0, 2] = value
    if convert:
        inputs = _as_backend(inputs)
    with pytest.raises(ValueError, match=message):
        backbone(inputs)


@pytest.mark.parametrize("convert", [False, True], ids=["numpy", "backend_tensor"])
def test_too_long_sequence_raises(convert):
    backbone = BertBackbone(**TINY)
    token_ids = np.ones((2, 33), "int32")
    with pytest.raises(ValueError, match=r"positions 0 to 32.*max_sequence_length=32"):
        backbone(ops.convert_to_tensor(token_ids) if convert else token_ids)
    # Exactly max_sequence_length is fine.
    assert tuple(backbone(token_ids[:, :32])["sequence_output"].shape) == (2, 32, 16)


def test_unknown_input_key_raises():
    backbone = BertBackbone(**TINY)
    ids = np.array([[2, 4, 3]], "int32")
    with pytest.raises(ValueError, match=r"\['token_ids', 'segment_ids', 'padding_mask'\].*'mask'"):
        backbone({"token_ids": ids, "mask": np.ones_like(ids)})
    with pytest.raises(ValueError, match=r"only `token_ids` is required"):
        backbone({"segment_ids": np.zeros_like(ids)})


def test_input_defaults():
    backbone = tiny_backbone()
    ids = padded_batch()["token_ids"]
    explicit = backbone(
        {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids)}
    )
    expected = reference(backbone, {"token_ids": ids})
    assert max_abs_diff(explicit["sequence_output"], expected["sequence_output"]) <= PARITY_ATOL
    variants = {
        "bare numpy": ids,
        "bare backend tensor": ops.convert_to_tensor(ids),
        "python list": ids.tolist(),
        "dict with token_ids only": {"token_ids": ids},
        "dict without padding_mask": {"token_ids": ids, "segment_ids": np.zeros_like(ids)},
        "dict without segment_ids": {"token_ids": ids, "padding_mask": np.ones_like(ids)},
    }
    for what, inputs in variants.items():
        outputs = backbone(inputs)
        for key in ("sequence_output", "pooled_output"):
            assert max_abs_diff(outputs[key], explicit[key]) <= 1e-6, (what, key)


@pytest.mark.parametrize("form", ["bare", "token_ids_only"])
def test_input_defaults_in_compiled_predict(form):
    """The defaults also apply in `predict`, whose compiled step reaches
    `call` without `__call__` on JAX (`stateless_call`)."""
    backbone = tiny_backbone()
    ids = padded_batch()["token_ids"]
    inputs = ids if form == "bare" else {"token_ids": ids}
    outputs = backbone.predict(inputs, batch_size=3, verbose=0)
    expected = reference(backbone, {"token_ids": ids})
    for key in ("sequence_output", "pooled_output"):
        assert max_abs_diff(outputs[key], expected[key]) <= PARITY_ATOL, key


# 9. Training ------------------------------------------------------------------


def test_training_step():
    backbone = tiny_backbone(dropout=0.1)
    inputs = {
        name: keras.Input(shape=(None,), dtype="int32", name=name)
        for name in ("token_ids", "segment_ids", "padding_mask")
    }
    logits = keras.layers.Dense(3, name="classifier")(backbone(inputs)["pooled_output"])
    model = keras.Model(inputs, logits)
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    rng = np.random.default_rng(5)
    batch = padded_batch()
    data = {k: np.concatenate([v, v], axis=0) for k, v in batch.items()}  # 6 examples
    data["token_ids"] = rng.integers(1, 50, data["token_ids"].shape).astype("int32")
    labels = np.array([0, 1, 2, 2, 0, 1])

    # Dropout is active in training mode only.
    a = to_numpy(backbone(data, training=True)["sequence_output"])
    b = to_numpy(backbone(data, training=True)["sequence_output"])
    assert max_abs_diff(a, b) > 1e-3
    c, d = backbone(data), backbone(data, training=False)
    np.testing.assert_array_equal(to_numpy(c["sequence_output"]), to_numpy(d["sequence_output"]))

    before = [to_numpy(v).copy() for v in model.trainable_variables]
    assert len(before) == len(backbone.weights) + 2
    # The loss at inference, as `evaluate` computes it, from eager calls: no test step to trace.
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    first = float(to_numpy(loss(labels, model(data))))
    # 25 steps on the same batch of 6, in one epoch: Keras' per-epoch work once.
    repeated = {k: np.tile(v, (25, 1)) for k, v in data.items()}
    model.optimizer.build(model.trainable_variables)  # as kzoo's tasks do: else TensorFlow traces the step twice
    history = model.fit(repeated, np.tile(labels, 25), epochs=1, batch_size=6, shuffle=False, verbose=0)
    last = float(to_numpy(loss(labels, model(data))))
    assert np.all(np.isfinite(history.history["loss"]))
    assert last < 0.3 * first, (first, last)
    unchanged = [
        v.path
        for v, old in zip(model.trainable_variables, before)
        if np.array_equal(to_numpy(v), old)
    ]
    assert not unchanged, f"variables without gradient: {unchanged}"


def test_preset(tmp_path):
    ids = np.array([[2, 7, 9, 3, 0, 0], [2, 11, 3, 0, 0, 0]], "int32")
    run_preset_test(BertBackbone, "bert_tiny", {"max_sequence_length": 64}, {"token_ids": ids},
                    {"pooled_output": (2, 128), "sequence_output": (2, 6, 128)}, tmp_path)
