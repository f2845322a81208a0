"""BERT's pre-training optimizer recipe (BERT sec. 3.1, A.2): the warmup +
linear-decay schedule, AdamW without decay on LayerNorm parameters and biases,
the paper's defaults, and the 128/512 phase split."""

import json

import keras
import numpy as np
import pytest
from keras import ops

from kzoo import BertAdamW, LinearWarmupLinearDecay, bert_pretraining_optimizer, pretraining_phases
from kzoo.models.bert.bert_optimizer import PretrainingPhase


def to_numpy(x):
    return ops.convert_to_numpy(x)


def rates(schedule, steps):
    return [float(to_numpy(schedule(step))) for step in steps]


# 1. LinearWarmupLinearDecay ---------------------------------------------------


def test_schedule_values():
    schedule = LinearWarmupLinearDecay(1e-4, warmup_steps=100, total_steps=1100)
    steps = [0, 1, 50, 99, 100, 101, 600, 1000, 1100, 1101, 5000]
    expected = [0.0, 1e-6, 5e-5, 9.9e-5, 1e-4, 1e-4 * 999 / 1000, 5e-5, 1e-5, 0.0, 0.0, 0.0]
    np.testing.assert_allclose(rates(schedule, steps), expected, rtol=1e-6, atol=1e-12)
    # A tensor step (what the optimizer passes) gives the same values.
    tensor_steps = [ops.convert_to_tensor(s, dtype="int32") for s in (50, 600)]
    np.testing.assert_allclose(rates(schedule, tensor_steps), [5e-5, 5e-5], rtol=1e-6)


def test_schedule_with_end_learning_rate_and_edge_cases():
    schedule = LinearWarmupLinearDecay(
        1e-3, warmup_steps=10, total_steps=110, end_learning_rate=1e-4
    )
    np.testing.assert_allclose(
        rates(schedule, [5, 10, 60, 110, 500]), [5e-4, 1e-3, 5.5e-4, 1e-4, 1e-4], rtol=1e-6
    )
    no_warmup = LinearWarmupLinearDecay(2e-4, warmup_steps=0, total_steps=100)
    np.testing.assert_allclose(
        rates(no_warmup, [0, 50, 100]), [2e-4, 1e-4, 0.0], rtol=1e-6, atol=1e-12
    )
    warmup_only = LinearWarmupLinearDecay(2e-4, warmup_steps=100, total_steps=100)
    np.testing.assert_allclose(
        rates(warmup_only, [50, 99, 100, 200]), [1e-4, 1.98e-4, 0.0, 0.0], rtol=1e-6, atol=1e-12
    )


@pytest.mark.parametrize("warmup,total", [(-1, 10), (20, 10), (0, 0)])
def test_schedule_rejects_bad_steps(warmup, total):
    with pytest.raises(ValueError, match=r"0 <= warmup_steps <= total_steps.*total_steps >= 1"):
        LinearWarmupLinearDecay(1e-4, warmup_steps=warmup, total_steps=total)


def test_schedule_config_round_trip():
    schedule = LinearWarmupLinearDecay(3e-4, warmup_steps=7, total_steps=70, end_learning_rate=1e-5)
    config = schedule.get_config()
    assert config == {
        "peak_learning_rate": 3e-4,
        "warmup_steps": 7,
        "total_steps": 70,
        "end_learning_rate": 1e-5,
        "gradient_accumulation_steps": 1,
    }
    serialized = json.loads(json.dumps(keras.saving.serialize_keras_object(schedule)))
    revived = keras.saving.deserialize_keras_object(serialized)
    assert isinstance(revived, LinearWarmupLinearDecay)
    assert revived.get_config() == config
    steps = [0, 3, 7, 30, 70, 90]
    assert rates(revived, steps) == rates(schedule, steps)


# 2. BertAdamW -----------------------------------------------------------------


def small_model():
    """Every kind of BERT variable: embeddings, kernels, biases, LayerNorm gamma/beta."""
    inputs = keras.Input(shape=(3,), dtype="int32")
    x = keras.layers.Embedding(10, 4, name="embedding")(inputs)
    x = keras.layers.Dense(4, name="dense", bias_initializer="ones")(x)
    x = keras.layers.LayerNormalization(name="layer_norm", beta_initializer="ones")(x)
    x = keras.layers.EinsumDense(
        "abc,cd->abd", output_shape=(3, 2), bias_axes="d", bias_initializer="ones", name="einsum"
    )(x)
    return keras.Model(inputs, x)


def apply_zero_gradients(optimizer, variables, steps=1):
    optimizer.build(variables)
    for _ in range(steps):
        optimizer.apply([ops.zeros(v.shape, v.dtype) for v in variables], variables)


def check_decay(optimizer, factor, decayed_names, kept_names):
    model = small_model()
    variables = model.trainable_variables
    names = sorted(v.name for v in variables)
    assert names == sorted(decayed_names + kept_names), names
    before = {v.path: to_numpy(v).copy() for v in variables}
    apply_zero_gradients(optimizer, variables, steps=2)
    for v in variables:
        old, new = before[v.path], to_numpy(v)
        assert np.all(old != 0), v.path  # a zero variable would not show decay
        if v.name in kept_names:
            np.testing.assert_array_equal(new, old, err_msg=v.path)
        else:
            np.testing.assert_allclose(new, old * factor**2, rtol=1e-6, err_msg=v.path)


def test_bert_adamw_excludes_layer_norm_and_biases():
    # Zero gradients: Adam's update is 0, so only the decoupled decay moves the
    # variables, by (1 - lr * wd) per step: (1 - 0.1 * 0.2) = 0.98.
    optimizer = BertAdamW(learning_rate=0.1, weight_decay=0.2)
    check_decay(
        optimizer,
        0.98,
        decayed_names=["embeddings", "kernel", "kernel"],
        kept_names=["bias", "gamma", "beta", "bias"],
    )


def test_plain_adamw_decays_everything():
    """Control: Keras' AdamW without exclusions decays LayerNorm and biases too."""
    model = small_model()
    variables = model.trainable_variables
    before = [to_numpy(v).copy() for v in variables]
    apply_zero_gradients(keras.optimizers.AdamW(learning_rate=0.1, weight_decay=0.2), variables)
    for v, old in zip(variables, before):
        np.testing.assert_allclose(to_numpy(v), old * 0.98, rtol=1e-6, err_msg=v.path)


def test_bert_adamw_exclusions_survive_config_round_trip():
    optimizer = BertAdamW(
        learning_rate=0.1, weight_decay=0.2, exclude_from_weight_decay_names=["embeddings", "gamma"]
    )
    config = optimizer.get_config()
    assert config["exclude_from_weight_decay_names"] == ["embeddings", "gamma"]
    revived = BertAdamW.from_config(json.loads(json.dumps(config)))
    assert revived.exclude_from_weight_decay_names == ("embeddings", "gamma")
    assert revived.get_config() == config
    check_decay(
        revived,
        0.98,
        decayed_names=["kernel", "kernel", "bias", "beta", "bias"],
        kept_names=["embeddings", "gamma"],
    )
    # Through keras' generic (de)serialization too, with the default exclusions.
    serialized = keras.saving.serialize_keras_object(BertAdamW(weight_decay=0.2))
    default = keras.saving.deserialize_keras_object(serialized)
    assert isinstance(default, BertAdamW)
    assert default.exclude_from_weight_decay_names == ("gamma", "beta", "bias")


# 3. The paper's optimizer ------------------------------------------------------


def test_bert_pretraining_optimizer_defaults():
    optimizer = bert_pretraining_optimizer(total_steps=1_000_000)
    assert isinstance(optimizer, BertAdamW)
    config = optimizer.get_config()
    assert config["weight_decay"] == 0.01
    assert (config["beta_1"], config["beta_2"], config["epsilon"]) == (0.9, 0.999, 1e-6)
    assert config["global_clipnorm"] == 1.0
    assert config["exclude_from_weight_decay_names"] == ["gamma", "beta", "bias"]
    schedule = keras.saving.deserialize_keras_object(config["learning_rate"])
    assert schedule.get_config() == {
        "peak_learning_rate": 1e-4,
        "warmup_steps": 10_000,
        "total_steps": 1_000_000,
        "end_learning_rate": 0.0,
        "gradient_accumulation_steps": 1,
    }
    # The optimizer reads the schedule at its own step counter.
    values = []
    for step in (0, 5_000, 10_000, 505_000, 1_000_000):
        optimizer.iterations.assign(step)
        values.append(float(to_numpy(optimizer.learning_rate)))
    np.testing.assert_allclose(values, [0.0, 5e-5, 1e-4, 5e-5, 0.0], rtol=1e-6, atol=1e-12)


def test_bert_pretraining_optimizer_short_and_unknown_runs():
    short = bert_pretraining_optimizer(total_steps=500)  # warmup 10k clipped to 500
    schedule = keras.saving.deserialize_keras_object(short.get_config()["learning_rate"])
    assert (schedule.warmup_steps, schedule.total_steps) == (500, 500)
    constant = bert_pretraining_optimizer()
    for step in (0, 123_456):
        constant.iterations.assign(step)
        assert float(to_numpy(constant.learning_rate)) == pytest.approx(1e-4, rel=1e-6)
    assert bert_pretraining_optimizer(global_clipnorm=None).global_clipnorm is None


# 4. Phases ----------------------------------------------------------------------


def test_pretraining_phases_paper_numbers():
    assert pretraining_phases(1000) == [(128, 20, 900, 0), (512, 80, 100, 900)]
    assert pretraining_phases(1_000_000) == [(128, 20, 900_000, 0), (512, 80, 100_000, 900_000)]
    assert all(isinstance(p, PretrainingPhase) for p in pretraining_phases(10))
    first, second = pretraining_phases(1000)
    assert second.sequence_length == 512 and second.max_predictions_per_seq == 80
    assert (second.steps, second.first_step) == (100, 900)
    assert first.first_step + first.steps == second.first_step


def test_pretraining_phases_options_and_rounding():
    # Other lengths: round(0.15 * length); halves round up (0.1 * 1005 = 100.5).
    assert pretraining_phases(1005, 64, 256) == [(64, 10, 904, 0), (256, 38, 101, 904)]
    assert pretraining_phases(100, max_predictions_per_seq=7) == [(128, 7, 90, 0), (512, 7, 10, 90)]
    assert pretraining_phases(100, phase_two_fraction=0.25, max_predictions_per_seq=(3, 9)) == [
        (128, 3, 75, 0),
        (512, 9, 25, 75),
    ]
    for total in range(5, 400):
        first, second = pretraining_phases(total)
        assert first.steps + second.steps == total
        assert second.steps == int(np.floor(0.1 * total + 0.5))


@pytest.mark.parametrize("total,fraction", [(4, 0.1), (100, 0.0), (100, 1.0), (10, 0.99)])
def test_pretraining_phases_rejects_empty_phases(total, fraction):
    with pytest.raises(ValueError, match=r"at least one step per phase"):
        pretraining_phases(total, phase_two_fraction=fraction)
