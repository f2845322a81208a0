"""kzoo.Transformer ("Attention Is All You Need" sec. 3, 6.1): weight tying and
embedding scale, sinusoids, padding, cached step-by-step decoding against the
full pass, generation, serialization, the default compile and input errors.

Parity with PyTorch's layers is in test_transformer_parity_torch.py, the
presets' sizes and parameter counts in test_transformer_presets.py.
"""

import math
import os
import warnings

import keras
import numpy as np
import pytest
from keras import ops

from kzoo.models.transformer.transformer import Transformer
from tests.layers.numpy_reference import randomize_weights

TINY = dict(
    vocabulary_size=40, num_layers=2, hidden_dim=16, intermediate_dim=32, num_heads=4,
    dropout=0.0, max_sequence_length=24,
)
ATOL = 1e-5
# XLA compiles a training step slower than the 15 steps take to run on TensorFlow.
QUICK = {"jit_compile": False} if keras.backend.backend() == "tensorflow" else {}
# Sources padded with 0 after 5, 4 and 5 tokens (3 is the end token). Tests
# reuse these shapes: JAX compiles every eager op once per shape.
SOURCE = np.array(
    [[5, 9, 13, 21, 3, 0, 0], [11, 4, 30, 3, 0, 0, 0], [8, 17, 25, 39, 3, 0, 0]], "int32"
)
# Decoder inputs start with 2; the second row is padded after 4 tokens.
TARGET = np.array([[2, 14, 6, 33, 9, 12], [2, 27, 5, 10, 0, 0], [2, 7, 7, 19, 36, 4]], "int32")


def to_numpy(x):
    return np.asarray(ops.convert_to_numpy(x))


def tiny_model(seed=0, **overrides):
    return randomize_weights(Transformer(**{**TINY, **overrides}), seed=seed)


def logits_of(model, source=SOURCE, target=TARGET):
    return to_numpy(model({"encoder_token_ids": source, "decoder_token_ids": target}))


# 1. Structure: names, weight tying, embedding scale, sinusoids -----------------


def test_weight_paths_and_shapes():
    model = Transformer(**TINY)
    shapes = {v.path: tuple(v.shape) for v in model.weights}
    # 1 shared table + per layer 16 (encoder) and 26 (decoder) tensors.
    assert len(shapes) == len(model.weights) == 1 + 2 * 16 + 2 * 26
    assert shapes["token_embedding/embeddings"] == (40, 16)
    assert shapes["encoder_layer_1/self_attention/query/kernel"] == (16, 4, 4)
    assert shapes["decoder_layer_1/cross_attention/attention_output/kernel"] == (4, 4, 16)
    assert shapes["decoder_layer_0/feed_forward/intermediate_dense/kernel"] == (16, 32)
    assert shapes["decoder_layer_1/feed_forward_layer_norm/gamma"] == (16,)
    # N(0, d_model^-0.5) embeddings: std 0.25 for d_model = 16 (640 samples).
    assert 0.22 < to_numpy(model.token_embedding.embeddings).std() < 0.28


def test_three_way_weight_tying():
    """One matrix: the only vocabulary-sized weight, and the output projection
    is the final decoder state times its transpose (sec. 3.4)."""
    model = tiny_model()
    vocabulary_weights = [v for v in model.weights if 40 in tuple(v.shape)]
    assert len(vocabulary_weights) == 1
    assert vocabulary_weights[0] is model.token_embedding.embeddings
    assert model.count_params() == 40 * 16 + sum(
        int(np.prod(v.shape)) for v in model.weights if not v.path.startswith("token_embedding")
    )
    # The final decoder state, by hand through the same layers.
    memory = model.encode(SOURCE)
    x = model.embed(TARGET, "decoder")
    for layer in model.decoder_layers:
        x = layer(x, memory, decoder_padding_mask=TARGET != 0, encoder_padding_mask=SOURCE != 0)
    expected = to_numpy(x) @ to_numpy(model.token_embedding.embeddings).T
    assert np.abs(expected).max() > 1.0
    np.testing.assert_allclose(logits_of(model), expected, atol=ATOL, rtol=0)
    # Source and target embeddings read the same matrix: changing it changes both sides.
    source_before = to_numpy(model.encode(SOURCE))
    model.token_embedding.embeddings.assign(to_numpy(model.token_embedding.embeddings) * 2.0)
    assert np.abs(to_numpy(model.encode(SOURCE)) - source_before).max() > 0.1
    assert np.abs(logits_of(model) - expected).max() > 1.0


# PE(pos, 2i) = sin(pos / 10000^(2i/16)), PE(pos, 2i+1) = cos(...) for d_model = 16,
# by hand: 10000^(-2/16) = 0.316228, 10000^(-4/16) = 0.1, 10000^(-14/16) = 0.000316228.
SINUSOIDS = {
    (1, 0): 0.841471, (1, 1): 0.540302,  # sin(1), cos(1)
    (1, 2): 0.310984, (1, 3): 0.950415,  # sin(0.316228), cos(0.316228)
    (2, 0): 0.909297, (2, 1): -0.416147,  # sin(2), cos(2)
    (3, 4): 0.295520, (3, 5): 0.955336,  # sin(0.3), cos(0.3)
    (5, 14): 0.001581, (5, 15): 0.999999,  # sin(0.00158114), cos(...)
}


@pytest.mark.parametrize("side", ["encoder", "decoder"])
def test_embeddings_are_scaled_and_get_sinusoids(side):
    """embed = sqrt(d_model) · E[ids] + PE (sec. 3.4, 3.5), no dropout at inference."""
    model = tiny_model()
    ids = np.array([[7, 7, 12, 30, 1, 39]], "int32")
    table = to_numpy(model.token_embedding.embeddings)
    embedded = to_numpy(model.embed(ids, side))[0]
    position_part = embedded - 4.0 * table[ids[0]]  # sqrt(16) = 4
    # Position 0 is (sin 0, cos 0, ...) = (0, 1, 0, 1, ...).
    np.testing.assert_allclose(position_part[0], np.tile([0.0, 1.0], 8), atol=1e-6)
    for (position, dim), value in SINUSOIDS.items():
        assert abs(position_part[position, dim] - value) < 2e-6, (position, dim)
    # The same id at positions 0 and 1 differs only by the encodings.
    np.testing.assert_allclose(embedded[1] - embedded[0], position_part[1] - position_part[0], atol=1e-6)


def test_learned_positions_add_one_table_per_stack():
    model = tiny_model(position_encoding="learned")
    encoder_table = to_numpy(model.encoder_position_embedding.position_embeddings)
    decoder_table = to_numpy(model.decoder_position_embedding.position_embeddings)
    assert encoder_table.shape == decoder_table.shape == (24, 16)
    ids = np.array([[5, 6, 7]], "int32")
    table = to_numpy(model.token_embedding.embeddings)
    for side, positions in (("encoder", encoder_table), ("decoder", decoder_table)):
        expected = 4.0 * table[ids[0]] + positions[:3]
        np.testing.assert_allclose(to_numpy(model.embed(ids, side))[0], expected, atol=1e-6)


def test_call_equals_encode_then_decode():
    model = tiny_model()
    split = to_numpy(model.decode(TARGET, model.encode(SOURCE), SOURCE))
    np.testing.assert_allclose(logits_of(model), split, atol=1e-6, rtol=0)


# 2. Masks and padding -----------------------------------------------------------


def test_source_padding_does_not_change_outputs():
    model = tiny_model()
    base = logits_of(model)
    # The same sources with 2 padding positions fewer.
    np.testing.assert_allclose(logits_of(model, SOURCE[:, :5]), base, atol=ATOL, rtol=0)
    # ...while a real source token does change them (the check can fail).
    changed = SOURCE.copy()
    changed[1, 2] = 17
    assert np.abs(logits_of(model, changed)[1] - base[1]).max() > 1e-3


def test_decoder_is_causal():
    model = tiny_model()
    base = logits_of(model)
    changed = TARGET.copy()
    changed[:, 3] = [38, 1, 22]
    after = logits_of(model, target=changed)
    np.testing.assert_allclose(after[:, :3], base[:, :3], atol=ATOL, rtol=0)
    assert np.abs(after[:, 3] - base[:, 3]).max() > 1e-3


# 3. Step-by-step decoding with the key/value cache ------------------------------


@pytest.mark.parametrize("position_encoding", ["sinusoidal", "learned"])
def test_cached_decoding_matches_full_call(position_encoding):
    model = tiny_model(position_encoding=position_encoding)
    target = np.where(TARGET == 0, 9, TARGET)[:, :5]  # no padding: every step is real
    full = logits_of(model, target=target)
    cache = model.initial_cache(SOURCE, max_length=8)
    assert int(to_numpy(cache["self_key_1"]).shape[1]) == 8
    for index in range(5):
        logits, cache = model.next_token_logits(ops.convert_to_tensor(target[:, index]), cache, index)
        assert tuple(logits.shape) == (3, 40)
        assert keras.backend.standardize_dtype(logits.dtype) == "float32"
        np.testing.assert_allclose(to_numpy(logits), full[:, index], atol=ATOL, rtol=0)
    # Written slots hold keys; the rest of the cache stays zero.
    keys = to_numpy(cache["self_key_0"])
    assert (np.abs(keys[:, :5]).max(axis=(2, 3)) > 0.01).all()
    assert not keys[:, 5:].any()


def test_cached_step_runs_inside_a_compiled_loop():
    """`next_token_logits` in `ops.while_loop`, compiled where the backend compiles
    (jax.jit, tf.function): teacher-forced logits equal the full call's."""
    model = tiny_model()
    target = np.where(TARGET == 0, 9, TARGET)
    full = logits_of(model, target=target)

    def decode_all(source, target):
        cache = model.initial_cache(source, max_length=6)
        collected = ops.zeros((3, 6, 40), "float32")

        def body(index, cache, collected):
            logits, cache = model.next_token_logits(ops.take(target, index, axis=1), cache, index)
            collected = ops.slice_update(collected, [0, index, 0], ops.expand_dims(logits, 1))
            return index + 1, cache, collected

        return ops.while_loop(lambda i, c, o: i < 6, body, (0, cache, collected))[2]

    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        decode_all = jax.jit(decode_all)
    elif backend == "tensorflow":
        import tensorflow as tf

        decode_all = tf.function(decode_all)
    out = decode_all(ops.convert_to_tensor(SOURCE), ops.convert_to_tensor(target))
    np.testing.assert_allclose(to_numpy(out), full, atol=ATOL, rtol=0)


# 4. Generation -------------------------------------------------------------------


def test_greedy_generate_follows_the_full_model_up_to_source_length_plus_50():
    """beam_size=1 is greedy: each token is the arg-max of the full pass over
    the generated prefix. max_length=None gives a buffer of padded source
    length + 50 and stops each row after its non-padding source length + 50
    tokens (sec. 6.1)."""
    model = tiny_model(seed=5, max_sequence_length=64)
    # A zero embedding row gives the end token logit 0, below the largest of the
    # 39 others, so no row ends before its length limit.
    table = to_numpy(model.token_embedding.embeddings)
    table[3] = 0.0
    model.token_embedding.embeddings.assign(table)
    tokens = to_numpy(model.generate(SOURCE, beam_size=1))
    assert tokens.shape == (3, 57) and tokens.dtype == np.int32
    limits = [55, 54, 55]  # 5, 4 and 5 source tokens + 50
    assert (tokens != 0).sum(axis=1).tolist() == limits
    for row, limit in enumerate(limits):
        assert not tokens[row, limit:].any()
    # The first 6 tokens (TARGET's shape, already compiled on JAX) by the full pass.
    prefix = np.concatenate([np.full((3, 1), 2, "int32"), tokens[:, :5]], axis=1)
    np.testing.assert_array_equal(tokens[:, :6], logits_of(model, target=prefix).argmax(-1))


def test_beam_generate_returns_tokens():
    model = tiny_model(seed=3)
    tokens = to_numpy(model.generate(SOURCE, beam_size=2, length_penalty=0.6, max_length=3))
    assert tokens.shape == (3, 3) and tokens.dtype == np.int32
    assert tokens.min() >= 0 and tokens.max() < 40
    assert (tokens[:, 0] != 0).all()


# 5. Serialization ------------------------------------------------------------------


def test_config_round_trip():
    # d_k and d_v free of d_model / h (Table 3 row B), learned positions (row E).
    model = Transformer(**TINY, key_dim=8, value_dim=4, position_encoding="learned")
    config = model.get_config()
    assert Transformer.from_config(config).get_config() == config
    assert config["key_dim"] == 8 and config["label_smoothing"] == 0.1
    shapes = {v.path: tuple(v.shape) for v in model.weights}
    assert shapes["decoder_layer_0/cross_attention/key/kernel"] == (16, 4, 8)
    assert shapes["decoder_layer_0/cross_attention/value/kernel"] == (16, 4, 4)
    assert shapes["encoder_position_embedding/embeddings"] == (24, 16)


def test_keras_file_and_preset_round_trips(tmp_path):
    model = tiny_model()
    model.compile()
    expected = logits_of(model)
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, Transformer)
    np.testing.assert_array_equal(logits_of(loaded), expected)
    assert float(loaded.loss.label_smoothing) == 0.1 and float(loaded.optimizer.beta_2) == 0.98
    model.save_to_preset(tmp_path / "preset")
    restored = Transformer.from_preset(tmp_path / "preset")
    np.testing.assert_array_equal(logits_of(restored), expected)


def test_mixed_precision_logits_are_float32():
    """Under mixed_bfloat16 the graph's logits are float32 and the weights stay
    float32 (read from the functional graph: the bfloat16 arithmetic itself is
    checked per block in tests/layers)."""
    model = Transformer(**TINY, dtype="mixed_bfloat16")
    assert keras.backend.standardize_dtype(model.output.dtype) == "float32"
    assert model.get_config()["dtype"]["config"]["name"] == "mixed_bfloat16"
    assert model.decoder_layers[0].compute_dtype == "bfloat16"
    assert all(keras.backend.standardize_dtype(v.dtype) == "float32" for v in model.weights)


# 6. Training recipe ---------------------------------------------------------------


def test_default_compile_is_the_paper_recipe():
    model = Transformer(**TINY, label_smoothing=0.2)
    model.compile()
    optimizer = model.optimizer
    assert (float(optimizer.beta_1), float(optimizer.beta_2), float(optimizer.epsilon)) == (0.9, 0.98, 1e-9)
    # Eq. 3 at the paper's step 1: 16^-0.5 · 1 · 4000^-1.5.
    assert math.isclose(float(optimizer.learning_rate), 0.25 * 4000**-1.5, rel_tol=1e-5)
    assert model.loss.label_smoothing == 0.2 and model.loss.padding_id == 0
    metrics = model.get_compile_config()["metrics"]
    assert [m["class_name"] for m in metrics] == ["MaskedAccuracy", "TokenPerplexity"]


@pytest.fixture(scope="module")
def trained():
    """A one-layer model trained 15 epochs on the three pairs, a `tf.data.Dataset` of one batch:
    (model, dataset, losses, weights it left unchanged). test_fit_on_a_dataset_gives_no_shuffle_warning
    fits it on, with the steps traced here (a fresh model's cost 3 s of CPU on TensorFlow)."""
    import tensorflow as tf  # noqa: PLC0415 (the input pipeline; the model tests are backend-agnostic)

    model = Transformer(**{**TINY, "dropout": 0.1, "num_layers": 1})
    # y[:, t] = decoder_token_ids[:, t + 1], ended by 3, padded with 0.
    labels = np.array([[14, 6, 33, 9, 12, 3], [27, 5, 10, 3, 0, 0], [7, 7, 19, 36, 4, 3]], "int32")
    dataset = tf.data.Dataset.from_tensor_slices(({"encoder_token_ids": SOURCE, "decoder_token_ids": TARGET},
                                                  labels)).batch(3)
    before = [to_numpy(v).copy() for v in model.trainable_variables]
    model.compile(optimizer=keras.optimizers.Adam(3e-3), metrics=None, **QUICK)  # the default loss
    losses = model.fit(dataset, epochs=15, verbose=0).history["loss"]
    unchanged = [v.path for v, b in zip(model.trainable_variables, before) if np.array_equal(to_numpy(v), b)]
    return model, dataset, losses, unchanged


def test_training_lowers_the_loss_and_reaches_every_weight(trained):
    _, _, losses, unchanged = trained
    assert losses[-1] < losses[0] - 0.5
    assert not unchanged


def test_fit_on_a_dataset_gives_no_shuffle_warning(trained):
    # Keras' default shuffle=True is ignored for a tf.data.Dataset, with a warning the
    # caller never caused; Transformer.fit leaves it out for datasets.
    model, dataset = trained[:2]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(dataset, epochs=1, verbose=0)
        model.fit(dataset.repeat(), steps_per_epoch=1, verbose=0)
    assert not [w for w in caught if "shuffle" in str(w.message)], [str(w.message) for w in caught]
    with pytest.warns(UserWarning, match="shuffle=True"):  # asked for explicitly: Keras still says so
        model.fit(dataset, shuffle=True, verbose=0)


# 7. Errors --------------------------------------------------------------------------


@pytest.mark.parametrize("name,value", [("encoder_token_ids", 40), ("decoder_token_ids", -1)])
def test_ids_out_of_range_raise(name, value):
    model = Transformer(**TINY)
    inputs = {"encoder_token_ids": SOURCE.copy(), "decoder_token_ids": TARGET.copy()}
    inputs[name][0, 1] = value
    with pytest.raises(ValueError, match=rf"{name} must lie in \[0, 40\)"):
        model(inputs)
    if name == "encoder_token_ids":
        with pytest.raises(ValueError, match=r"encoder_token_ids must lie in \[0, 40\)"):
            model.generate(inputs[name], beam_size=1, max_length=3)
    else:
        with pytest.raises(ValueError, match=r"decoder_token_ids must lie in \[0, 40\)"):
            model.decode(inputs[name], model.encode(SOURCE), SOURCE)


@pytest.mark.parametrize("position_encoding", ["sinusoidal", "learned"])
def test_too_long_sequences_raise(position_encoding):
    model = Transformer(**TINY, position_encoding=position_encoding)
    long = np.ones((1, 25), "int32")
    with pytest.raises(ValueError, match="encoder_token_ids.*max_sequence_length=24"):
        model({"encoder_token_ids": long, "decoder_token_ids": TARGET[:1]})
    with pytest.raises(ValueError, match="decoder_token_ids.*max_sequence_length=24"):
        model({"encoder_token_ids": SOURCE[:1], "decoder_token_ids": long})
    with pytest.raises(ValueError, match="max_sequence_length=24"):
        model.generate(SOURCE[:1], beam_size=1, max_length=25)


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"hidden_dim": 18}, "hidden_dim=18 is not divisible by num_heads=4"),
        ({"position_encoding": "rotary"}, "Unknown position_encoding 'rotary'"),
        ({"end_id": 40}, "end_id=40 is not a token id"),
    ],
)
def test_bad_config_raises(overrides, message):
    with pytest.raises(ValueError, match=message):
        Transformer(**{**TINY, **overrides})


def test_bad_inputs_raise():
    model = Transformer(**TINY)
    with pytest.raises(ValueError, match="dict with keys"):
        model({"token_ids": SOURCE})
    with pytest.raises(ValueError, match="beam_size must be an int >= 1; got 0"):
        model.generate(SOURCE, beam_size=0)
