"""BertPretrainer / BertMaskedLM / BertMaskedLMHead (BERT sec. 3.1, A.1, A.2):
logits and loss against a float64 numpy reference, weight tying, parameter
counts, serialization with the compiled optimizer, training on tf.data with
the paper's optimizer, and input errors.

Every test runs on the backend of the session (KERAS_BACKEND).
"""

import gc
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from kzoo import (
    BertAdamW,
    BertBackbone,
    BertMaskedLM,
    BertPretrainer,
    bert_pretraining_optimizer,
)
from kzoo.models.bert import BertMaskedLMHead
from tests.layers.numpy_reference import gelu_exact
from tests.layers.numpy_reference import normalize as layer_norm
from tests.layers.numpy_reference import randomize_weights
from tests.models.bert import numpy_bert
from tests.test_case import run_layer_test

TINY = dict(
    vocabulary_size=50,
    num_layers=2,
    num_heads=2,
    hidden_dim=16,
    intermediate_dim=32,
    max_sequence_length=16,
    dropout=0.0,
)
PARITY_ATOL = 1e-5  # float32 model vs float64 reference
# XLA compilation costs more than these few tiny steps on TensorFlow (CPU).
QUICK = {"jit_compile": False} if keras.backend.backend() == "tensorflow" else {}


def to_numpy(x):
    return np.asarray(ops.convert_to_numpy(ops.cast(x, "float32")), dtype=np.float64)


def max_abs_diff(a, b):
    return float(np.max(np.abs(to_numpy(a) - np.asarray(b, dtype=np.float64))))


def batch():
    """Three examples of length 10 with P = 4 prediction slots; example 1 is
    padded after 7 tokens and uses 2 slots, example 2 uses 3 (slot weights 0
    elsewhere, positions 0 there)."""
    token_ids = np.array(
        [
            [2, 11, 4, 23, 5, 41, 4, 13, 3, 9],
            [2, 31, 8, 4, 3, 49, 3, 1, 1, 1],
            [2, 4, 19, 3, 27, 4, 3, 48, 6, 3],
        ],
        "int32",
    )
    features = {
        "token_ids": token_ids,
        "segment_ids": np.array([[0] * 10, [0] * 5 + [1] * 5, [0] * 4 + [1] * 6], "int32"),
        "padding_mask": np.array([[1] * 10, [1] * 7 + [0] * 3, [1] * 10], "int32"),
        "mask_positions": np.array([[2, 6, 9, 1], [3, 5, 0, 0], [1, 5, 8, 0]], "int32"),
    }
    labels = {
        "mask_ids": np.array([[17, 40, 9, 12], [7, 49, 0, 0], [33, 2, 48, 0]], "int32"),
        "mask_weights": np.array([[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 0]], "float32"),
        "next_sentence_label": np.array([0, 1, 1], "int32"),
    }
    return features, labels


def tiny_pretrainer(cls=BertPretrainer, seed=0, **overrides):
    # O(1) random values in every weight (biases and LayerNorm included), so
    # that a misplaced or forgotten weight shows in the comparisons.
    return randomize_weights(cls(BertBackbone(**{**TINY, **overrides})), seed)


# Float64 numpy reference ------------------------------------------------------


def log_softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def cross_entropy(logits, labels):
    """-log softmax(logits)[label], per example."""
    return -np.take_along_axis(log_softmax(logits), np.asarray(labels)[..., None], axis=-1)[..., 0]


def reference_mlm_logits(w, sequence_output, mask_positions, epsilon=1e-12):
    """Sec. 3.1: gather at the masked positions, dense + GELU + LayerNorm, then
    the transposed input embedding plus an output bias."""
    h = np.take_along_axis(sequence_output, mask_positions[:, :, None].astype(int), axis=1)
    h = gelu_exact(h @ w["mlm_head/transform_dense/kernel"] + w["mlm_head/transform_dense/bias"])
    norm = "mlm_head/transform_layer_norm"
    h = layer_norm(h, w[f"{norm}/gamma"], w[f"{norm}/beta"], epsilon)
    return h @ w["token_embedding/embeddings"].T + w["mlm_head/bias"]


def reference(model, features, labels):
    """Logits and losses (A.2) in float64 from the model's weights alone."""
    w = numpy_bert.weights_by_path(model)
    encoded = numpy_bert.bert_forward(
        w, features["token_ids"], features["segment_ids"], features["padding_mask"]
    )
    mlm_logits = reference_mlm_logits(w, encoded["sequence_output"], features["mask_positions"])
    ce = cross_entropy(mlm_logits, labels["mask_ids"])
    weights = labels["mask_weights"].astype(np.float64)
    out = {"mlm_logits": mlm_logits, "mlm_ce": ce, "mlm_loss": (ce * weights).sum() / weights.sum()}
    if "next_sentence_dense/kernel" in w:
        nsp_logits = encoded["pooled_output"] @ w["next_sentence_dense/kernel"]
        nsp_logits = nsp_logits + w["next_sentence_dense/bias"]
        nsp_loss = cross_entropy(nsp_logits, labels["next_sentence_label"]).mean()
        out.update(nsp_logits=nsp_logits, nsp_loss=nsp_loss)
    return out


# 1. Numbers -------------------------------------------------------------------


def test_pretrainer_logits_and_loss_match_numpy():
    model = tiny_pretrainer()
    features, labels = batch()
    outputs = model(features)
    expected = reference(model, features, labels)
    assert tuple(outputs["mlm_logits"].shape) == (3, 4, 50)
    assert tuple(outputs["nsp_logits"].shape) == (3, 2)
    assert np.abs(expected["mlm_logits"]).max() > 1.0  # O(1) logits: the tolerance means something
    assert max_abs_diff(outputs["mlm_logits"], expected["mlm_logits"]) <= PARITY_ATOL
    assert max_abs_diff(outputs["nsp_logits"], expected["nsp_logits"]) <= PARITY_ATOL

    loss = model.compute_loss(features, labels, outputs)
    want = expected["mlm_loss"] + expected["nsp_loss"]
    assert abs(float(to_numpy(loss)) - want) <= PARITY_ATOL, (float(to_numpy(loss)), want)
    # Weight-0 slots do not count: other labels there leave the loss unchanged,
    # while the same change at a real slot moves it.
    padding = labels["mask_weights"] == 0
    relabelled = dict(labels, mask_ids=np.where(padding, 37, labels["mask_ids"]))
    loss_of = lambda y: float(to_numpy(model.compute_loss(features, y, outputs)))  # noqa: E731
    assert loss_of(relabelled) == float(to_numpy(loss))
    real = dict(labels, mask_ids=np.where(padding, labels["mask_ids"], 37))
    assert abs(loss_of(real) - want) > 0.1
    losses = model.task_losses(labels, outputs)
    assert abs(float(to_numpy(losses["mlm_loss"])) - expected["mlm_loss"]) <= PARITY_ATOL
    assert abs(float(to_numpy(losses["nsp_loss"])) - expected["nsp_loss"]) <= PARITY_ATOL


def test_head_logits_from_backbone_sequence_output():
    """The head alone, on the kzoo backbone's own sequence output: gathering
    first, then transform and the tied projection (sec. 3.1)."""
    model = tiny_pretrainer(seed=1)
    features, _ = batch()
    backbone_inputs = {k: features[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    sequence_output = model.backbone(backbone_inputs)["sequence_output"]
    logits = model.mlm_head(sequence_output, features["mask_positions"])
    w = numpy_bert.weights_by_path(model)
    expected = reference_mlm_logits(w, to_numpy(sequence_output), features["mask_positions"])
    assert max_abs_diff(logits, expected) <= PARITY_ATOL
    # Positions are gathered, not the first P rows: other positions give other logits.
    shifted = dict(features, mask_positions=(features["mask_positions"] + 1) % 10)
    assert max_abs_diff(model(shifted)["mlm_logits"], expected) > 0.1


@pytest.mark.parametrize("cls", [BertPretrainer, BertMaskedLM])
def test_last_layer_runs_only_at_cls_and_the_masked_positions(cls):
    """No work for outputs the loss never reads: the last encoder layer's
    feed-forward network sees [CLS] + P rows per sequence, the others all T."""
    model = tiny_pretrainer(cls, seed=3)
    features, _ = batch()
    seen = []
    for layer in model.backbone.transformer_layers:
        feed_forward = layer.feed_forward
        original = feed_forward.call
        feed_forward.call = lambda x, *a, _f=original, **k: seen.append(tuple(x.shape)) or _f(
            x, *a, **k
        )
    model(features)
    assert seen == [(3, 10, 16), (3, 5, 16)]  # TINY: 2 layers, H = 16; P = 4
    # The gathered rows feed the head as they are: the same logits as gathering
    # from the full sequence output.
    sequence_output = model.backbone({k: features[k] for k in features if k != "mask_positions"})
    full = model.mlm_head(sequence_output["sequence_output"], features["mask_positions"])
    assert max_abs_diff(model(features)["mlm_logits"], to_numpy(full)) <= PARITY_ATOL


def test_masked_lm_logits_and_loss_match_numpy():
    model = tiny_pretrainer(BertMaskedLM, seed=2)
    features, labels = batch()
    outputs = model(features)
    assert sorted(outputs) == ["mlm_logits"]
    expected = reference(model, features, labels)
    assert "nsp_loss" not in expected  # no NSP weights in the model
    assert max_abs_diff(outputs["mlm_logits"], expected["mlm_logits"]) <= PARITY_ATOL
    loss = model.compute_loss(features, labels, outputs)
    assert abs(float(to_numpy(loss)) - expected["mlm_loss"]) <= PARITY_ATOL
    # next_sentence_label is optional and ignored.
    without = {k: v for k, v in labels.items() if k != "next_sentence_label"}
    assert float(to_numpy(model.compute_loss(features, without, outputs))) == float(to_numpy(loss))


def test_all_padding_slots_give_zero_mlm_loss():
    model = tiny_pretrainer()
    features, labels = batch()
    labels = dict(labels, mask_weights=np.zeros((3, 4), "float32"))
    losses = model.task_losses(labels, model(features))
    assert float(to_numpy(losses["mlm_loss"])) == 0.0
    assert np.isfinite(float(to_numpy(losses["nsp_loss"])))


# 2. Weight tying and names --------------------------------------------------------


def test_weight_tying_and_names():
    model = tiny_pretrainer()
    backbone = model.backbone
    shapes = [tuple(v.shape) for v in model.weights]
    assert shapes.count((50, 16)) == 1  # one vocabulary x H matrix: W_e, shared
    assert model.mlm_head.token_embedding is backbone.token_embedding
    assert len(model.weights) == len(backbone.weights) + 5 + 2
    paths = {v.path: v for v in model.weights}
    assert tuple(paths["mlm_head/bias"].shape) == (50,) and paths["mlm_head/bias"].name == "bias"
    assert tuple(paths["mlm_head/transform_dense/kernel"].shape) == (16, 16)
    assert tuple(paths["mlm_head/transform_layer_norm/gamma"].shape) == (16,)
    assert tuple(paths["next_sentence_dense/kernel"].shape) == (16, 2)

    # Changing one row of W_e that no input uses leaves the sequence output
    # alone and moves exactly that logit column: the output projection is W_e^T.
    features, _ = batch()
    row = 45
    assert not np.any(features["token_ids"] == row)
    before = to_numpy(model(features)["mlm_logits"])
    table = ops.convert_to_numpy(backbone.token_embedding.embeddings).copy()
    table[row] += 1.0
    backbone.token_embedding.embeddings.assign(table)
    after = to_numpy(model(features)["mlm_logits"])
    changed = np.abs(after - before).max(axis=(0, 1))
    assert changed[row] > 0.1
    assert np.delete(changed, row).max() <= 1e-6


@pytest.mark.once  # 110M float32 weights built to be counted: the count is the same on every backend
def test_parameter_count_bert_base():
    """BERT BASE + heads, closed form (sec. 3: 109,482,240 for the backbone),
    in float32 (the default policy)."""
    model = BertPretrainer.from_preset("bert_base_uncased", load_weights=False)  # random weights
    try:
        H, V = 768, 30522
        backbone = 109_482_240
        mlm_head = H * H + H + 2 * H + V  # transform dense, LayerNorm, output bias (W_e tied)
        nsp_head = 2 * H + 2
        assert model.backbone.count_params() == backbone
        assert model.count_params() == backbone + mlm_head + nsp_head == 110_106_428
        assert model.backbone.hidden_dim == H and model.backbone.vocabulary_size == V
        assert all(keras.backend.standardize_dtype(v.dtype) == "float32" for v in model.weights)
    finally:
        del model
        keras.backend.clear_session()
        gc.collect()


def test_from_preset_overrides():
    model = BertMaskedLM.from_preset(
        "bert_tiny", load_weights=False, vocabulary_size=100, max_sequence_length=64, num_layers=1
    )
    assert isinstance(model.backbone, BertBackbone)
    assert model.backbone.max_sequence_length == 64 and model.backbone.num_layers == 1
    assert model.backbone.hidden_dim == 128
    heads = 128 * 128 + 128 + 2 * 128 + 100  # transform dense + LayerNorm + output bias
    assert model.count_params() == model.backbone.count_params() + heads
    assert not hasattr(model, "next_sentence_dense")


# 3. Serialization ----------------------------------------------------------------------


def test_head_layer_checks():
    """The shared layer checks (config round trip, training, mixed precision)."""
    embedding = BertBackbone(**TINY).token_embedding
    rng = np.random.default_rng(0)
    run_layer_test(
        BertMaskedLMHead,
        {
            "token_embedding": embedding,
            "activation": "gelu_approximate",
            "layer_norm_epsilon": 1e-6,
        },
        {
            "sequence_output": rng.normal(size=(2, 7, 16)).astype("float32"),
            "mask_positions": np.array([[1, 6, 3], [0, 2, 2]], "int32"),
        },
        expected_output_shape=(2, 3, 50),
    )


def test_head_config_does_not_carry_the_embedding():
    embedding = BertBackbone(**TINY).token_embedding
    head = BertMaskedLMHead(token_embedding=embedding, layer_norm_epsilon=1e-6, name="head")
    config = head.get_config()
    assert "token_embedding" not in config
    assert config["activation"] == "gelu" and config["layer_norm_epsilon"] == 1e-6
    revived = BertMaskedLMHead.from_config(config)
    assert revived.get_config() == config
    inputs = (np.ones((1, 4, 16), "float32"), np.array([[1, 2]], "int32"))
    message = r"no `token_embedding`.*token_embedding=backbone.token_embedding"
    with pytest.raises(ValueError, match=message):
        revived(*inputs)
    resupplied = BertMaskedLMHead.from_config({**config, "token_embedding": embedding})
    assert tuple(resupplied(*inputs).shape) == (1, 2, 50)


@pytest.mark.parametrize("cls", [BertPretrainer, BertMaskedLM])
def test_get_config_from_config_round_trip(cls):
    model = tiny_pretrainer(cls, activation="gelu_approximate")
    config = model.get_config()
    assert sorted(config) == ["backbone", "name", "tokenizer", "trainable"]
    assert config["tokenizer"] is None
    assert config["backbone"]["config"]["activation"] == "gelu_approximate"
    revived = cls.from_config(config)
    assert revived.get_config() == config
    assert [v.path for v in revived.weights] == [v.path for v in model.weights]
    assert revived.mlm_head.activation == "gelu_approximate"
    revived.set_weights(model.get_weights())
    features, _ = batch()
    a, b = model(features), revived(features)
    for key in a:
        assert max_abs_diff(a[key], to_numpy(b[key])) == 0.0, key


def test_keras_save_and_load_with_compiled_optimizer(tmp_path):
    """Outputs, the BertAdamW optimizer (exclusions, schedule, state) and the
    next training step all survive a `.keras` round trip."""
    model = tiny_pretrainer(seed=3)
    features, labels = batch()
    optimizer = bert_pretraining_optimizer(total_steps=20, warmup_steps=4, learning_rate=1e-2)
    model.compile(optimizer=optimizer, **QUICK)
    model.fit(features, labels, epochs=3, batch_size=3, verbose=0)
    path = str(tmp_path / "pretrainer.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)

    assert isinstance(loaded, BertPretrainer)
    assert loaded.get_config() == model.get_config()
    assert loaded.mlm_head.token_embedding is loaded.backbone.token_embedding  # still tied
    a, b = model(features), loaded(features)
    for key in a:
        assert max_abs_diff(a[key], to_numpy(b[key])) <= 1e-6, key
    assert isinstance(loaded.optimizer, BertAdamW)
    assert loaded.optimizer.exclude_from_weight_decay_names == ("gamma", "beta", "bias")
    assert loaded.optimizer.get_config() == model.optimizer.get_config()
    assert int(ops.convert_to_numpy(loaded.optimizer.iterations)) == 3
    # The optimizer state (step counter, Adam moments) is restored too.
    state = {v.path: to_numpy(v) for v in model.optimizer.variables}
    restored = {v.path: to_numpy(v) for v in loaded.optimizer.variables}
    assert sorted(state) == sorted(restored)
    assert len(state) == 1 + 2 * len(model.trainable_weights)  # step, m, v
    assert max(np.abs(state[k]).max() for k in state) > 0  # moments are non-zero after 3 steps
    for key, value in state.items():
        np.testing.assert_array_equal(restored[key], value, err_msg=key)


# 4. Training -------------------------------------------------------------------------------


def toy_dataset(size=96, length=12, predictions=3, vocabulary_size=40, seed=0):
    """A learnable pre-training task: the masked token is a fixed function of its
    position, (3 * position + 5) mod V, and NotNext (1) means that segment B
    starts early (at 2-4) rather than late (10-11) or not at all."""
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(5, vocabulary_size, (size, length)).astype("int32")
    token_ids[:, 0] = 2
    positions = np.stack(
        [rng.choice(np.arange(1, length), predictions, replace=False) for _ in range(size)]
    ).astype("int32")
    np.put_along_axis(token_ids, positions, 4, axis=1)  # [MASK]
    weights = np.ones((size, predictions), "float32")
    weights[::2, -1] = 0.0  # every other example uses only 2 slots
    boundary = rng.choice([2, 3, 4, 10, 11, 12], size)
    features = {
        "token_ids": token_ids,
        "segment_ids": (np.arange(length)[None] >= boundary[:, None]).astype("int32"),
        "padding_mask": np.ones((size, length), "int32"),
        "mask_positions": positions,
    }
    labels = {
        "mask_ids": ((3 * positions + 5) % vocabulary_size).astype("int32"),
        "mask_weights": weights,
        "next_sentence_label": (boundary < length / 2).astype("int32"),
    }
    return features, labels


def numpy_metrics(outputs, labels, batch_size):
    """What `evaluate` reports over a dataset of equal batches: per-batch losses
    averaged over batches, accuracies over all (weighted) predictions."""
    logits, w = outputs["mlm_logits"].astype(np.float64), labels["mask_weights"]
    ce = cross_entropy(logits, labels["mask_ids"]) * w
    batches = [slice(i, i + batch_size) for i in range(0, len(ce), batch_size)]
    nsp = outputs["nsp_logits"].astype(np.float64)
    return {
        "mlm_loss": np.mean([ce[b].sum() / w[b].sum() for b in batches]),
        "mlm_accuracy": ((logits.argmax(-1) == labels["mask_ids"]) * w).sum() / w.sum(),
        "nsp_loss": cross_entropy(nsp, labels["next_sentence_label"]).mean(),
        "nsp_accuracy": (nsp.argmax(-1) == labels["next_sentence_label"]).mean(),
    }


@pytest.mark.once  # trains to a stated accuracy: one backend per run (tests/conftest.py)
def test_fit_on_tf_data_learns_the_toy_task():
    features, labels = toy_dataset()
    batch_size, epochs = 16, 10  # 60 steps; NSP is learned after 25-35 of them
    dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(batch_size)
    config = {**TINY, "vocabulary_size": 40, "hidden_dim": 32, "intermediate_dim": 64}
    model = BertPretrainer(BertBackbone(**config))
    steps = epochs * len(dataset)
    optimizer = bert_pretraining_optimizer(total_steps=steps, warmup_steps=6, learning_rate=1e-2)
    model.compile(optimizer=optimizer, **QUICK)
    keys = ["loss", "mlm_accuracy", "mlm_loss", "nsp_accuracy", "nsp_loss"]

    # Before training: evaluate's metrics are the numbers the model's outputs
    # give (on JAX too, whose compiled steps update metric variables statelessly).
    logs = model.evaluate(dataset, verbose=0, return_dict=True)
    assert sorted(logs) == keys
    outputs = {k: to_numpy(v) for k, v in model(features).items()}
    expected = numpy_metrics(outputs, labels, batch_size)
    assert expected["mlm_loss"] > 3.0 and expected["nsp_loss"] > 0.5  # O(1): untrained
    for key, value in expected.items():
        assert abs(logs[key] - value) <= 1e-5 * max(1.0, value), (key, logs[key], value)
    assert abs(logs["loss"] - expected["mlm_loss"] - expected["nsp_loss"]) <= 1e-4

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit(dataset, epochs=epochs, verbose=0).history
    # A dataset shuffles itself: no Keras "`shuffle=True` was passed" warning the caller never caused.
    assert not [w for w in caught if "shuffle" in str(w.message)], [str(w.message) for w in caught]
    assert sorted(history) == keys
    assert all(np.all(np.isfinite(history[k])) for k in keys)
    # loss = mlm_loss + nsp_loss (A.2), epoch by epoch.
    np.testing.assert_allclose(
        history["loss"], np.add(history["mlm_loss"], history["nsp_loss"]), rtol=1e-5
    )
    mlm = history["mlm_loss"]
    assert mlm[-1] <= 0.7 * mlm[0], mlm  # measured: 3.3 -> below 0.02
    assert history["mlm_accuracy"][-1] > 0.9, history["mlm_accuracy"]
    assert history["nsp_accuracy"][-1] > 0.8, history["nsp_accuracy"]
    assert int(ops.convert_to_numpy(model.optimizer.iterations)) == steps


def test_masked_lm_fit_leaves_the_pooler_alone():
    """Without NSP no loss reaches the pooler: it is not trained (and not
    weight-decayed) on any backend, and no missing-gradient warning is raised."""
    features, labels = batch()
    model = tiny_pretrainer(BertMaskedLM, seed=4)
    pooler = model.backbone.pooled_dense.weights
    before = [to_numpy(v) for v in pooler]
    embedding = to_numpy(model.backbone.token_embedding.embeddings)
    assert len(model.trainable_weights) == len(model.weights) - 2
    assert len(model.non_trainable_weights) == 2
    model.compile(optimizer=keras.optimizers.AdamW(0.05, weight_decay=0.5), **QUICK)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        history = model.fit(features, labels, epochs=2, batch_size=3, verbose=0).history
    assert sorted(history) == ["loss", "mlm_accuracy", "mlm_loss"]
    assert all(np.array_equal(b, to_numpy(v)) for b, v in zip(before, pooler))
    assert max_abs_diff(model.backbone.token_embedding.embeddings, embedding) > 1e-3
    # The backbone itself is untouched: all its weights stay trainable.
    assert len(model.backbone.trainable_weights) == len(model.backbone.weights)


def test_default_compile_is_the_papers_optimizer():
    model = BertPretrainer(BertBackbone(**TINY))
    model.compile()
    optimizer = model.optimizer
    assert isinstance(optimizer, BertAdamW)
    assert float(ops.convert_to_numpy(optimizer.learning_rate)) == pytest.approx(1e-4, rel=1e-6)
    adam = (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon)
    assert optimizer.weight_decay == 0.01 and adam == (0.9, 0.999, 1e-6)


def test_loss_in_float32_under_mixed_precision():
    features, labels = batch()
    model = tiny_pretrainer(seed=5)
    mixed = BertPretrainer(BertBackbone(**TINY, dtype="mixed_bfloat16"))
    mixed.set_weights(model.get_weights())
    outputs = mixed(features)
    assert keras.backend.standardize_dtype(outputs["mlm_logits"].dtype) == "bfloat16"
    loss = mixed.compute_loss(features, labels, outputs)
    assert keras.backend.standardize_dtype(loss.dtype) == "float32"
    want = float(to_numpy(model.compute_loss(features, labels, model(features))))
    assert abs(float(to_numpy(loss)) - want) <= 0.05 * want, (float(to_numpy(loss)), want)
    # mixed_float16 gets Keras' loss scaling around the paper's optimizer.
    half = BertPretrainer(BertBackbone(**{**TINY, "num_layers": 1}, dtype="mixed_float16"))
    half.compile()
    assert isinstance(half.optimizer, keras.optimizers.LossScaleOptimizer)
    assert isinstance(half.optimizer.inner_optimizer, BertAdamW)


# 5. Errors ----------------------------------------------------------------------------


MISSING_POSITIONS = r"BertPretrainer takes a dict with keys .*`mask_positions`.* are required"


def test_missing_mask_positions_raise():
    model = BertPretrainer(BertBackbone(**TINY))
    features, labels = batch()
    without = {k: v for k, v in features.items() if k != "mask_positions"}
    with pytest.raises(ValueError, match=MISSING_POSITIONS):
        model(without)
    with pytest.raises(ValueError, match=MISSING_POSITIONS):
        model(features["token_ids"])
    with pytest.raises(ValueError, match=MISSING_POSITIONS + r".*'masked_positions'"):
        model({**features, "masked_positions": features["mask_positions"]})
    model.compile()
    dataset = tf.data.Dataset.from_tensor_slices((without, labels)).batch(3)
    with pytest.raises(ValueError, match=MISSING_POSITIONS):
        model.fit(dataset, verbose=0)
    assert int(ops.convert_to_numpy(model.optimizer.iterations)) == 0  # raised before any step


@pytest.mark.parametrize("missing", ["mask_ids", "mask_weights", "next_sentence_label", "all"])
def test_missing_labels_raise(missing):
    model = BertPretrainer(BertBackbone(**TINY))
    model.compile()
    features, labels = batch()
    labels = None if missing == "all" else {k: v for k, v in labels.items() if k != missing}
    message = (
        r"BertPretrainer needs labels as a dict with keys "
        r"\['mask_ids', 'mask_weights', 'next_sentence_label'\]"
    )
    with pytest.raises(ValueError, match=message):
        model.compute_loss(features, labels, model(features))
    data = (features,) if labels is None else (features, labels)
    with pytest.raises(ValueError, match=message):
        model.fit(tf.data.Dataset.from_tensor_slices(data).batch(3), verbose=0)
    with pytest.raises(ValueError, match=message):
        model.evaluate(features, labels, verbose=0)
    assert int(ops.convert_to_numpy(model.optimizer.iterations)) == 0


def test_masked_lm_label_errors():
    model = BertMaskedLM(BertBackbone(**TINY))
    features, labels = batch()
    outputs = model(features)
    message = r"BertMaskedLM needs labels .*\['mask_ids', 'mask_weights'\] \(next_sentence_label is"
    with pytest.raises(ValueError, match=message):
        model.compute_loss(features, {"mask_ids": labels["mask_ids"]}, outputs)
    typo = r"got \['mask_ids', 'mask_weight', 'mask_weights', 'next_sentence_label'\]"
    with pytest.raises(ValueError, match=typo):
        model.compute_loss(features, {**labels, "mask_weight": labels["mask_weights"]}, outputs)


def test_other_errors():
    model = BertPretrainer(BertBackbone(**TINY))
    features, labels = batch()
    with pytest.raises(ValueError, match=r"`mask_positions` must lie in \[0, 10\).*from 0 to 10"):
        model({**features, "mask_positions": np.array([[10, 0, 0, 0]] * 3, "int32")})
    with pytest.raises(ValueError, match=r"computes its own loss and metrics.*\['loss'\]"):
        model.compile(loss="mse")
    model.compile()
    with pytest.raises(ValueError, match=r"does not take `sample_weight`.*mask_weights"):
        model.compute_loss(features, labels, model(features), sample_weight=np.ones(3, "float32"))


def test_preset_directory_keeps_heads_and_tokenizer(tmp_path):
    from kzoo import BertTokenizer

    tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(45)])
    model = tiny_pretrainer(BertPretrainer)
    model = BertPretrainer(model.backbone, tokenizer=tokenizer)
    model.save_to_preset(tmp_path)
    revived = BertPretrainer.from_preset(tmp_path)
    features, _ = batch()
    a, b = model(features), revived(features)
    for key in a:
        assert max_abs_diff(a[key], to_numpy(b[key])) <= 1e-6, key
    assert revived.tokenizer.get_vocabulary() == tokenizer.get_vocabulary()
    # The same directory gives the backbone alone, and MLM-only training with fresh heads.
    inputs = {k: v for k, v in features.items() if k != "mask_positions"}
    assert max_abs_diff(
        BertBackbone.from_preset(tmp_path)(inputs)["sequence_output"],
        to_numpy(model.backbone(inputs)["sequence_output"]),
    ) <= 1e-6
    assert BertMaskedLM.from_preset(tmp_path).backbone.num_layers == model.backbone.num_layers


def test_output_positions_do_not_mix_with_every_layers_outputs():
    model = tiny_pretrainer()
    features, _ = batch()
    embeddings = model.backbone.embed(features)
    with pytest.raises(ValueError, match="cannot be combined with `return_hidden_states`"):
        model.backbone.encode(
            embeddings, features["padding_mask"], return_hidden_states=True, output_positions=features["mask_positions"]
        )
