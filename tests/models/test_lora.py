"""LoRA (kzoo.layers.lora) on every backend: only the factors and a task's
head train, the frozen weights stay bit for bit, the loss falls; the
adapter file, presets, `.keras` files and weights files give the same model
back (presets and weights files exactly, factors included); the merged copy
and the exports compute the same outputs within 1e-5; an int8 backbone
trains under LoRA; mistakes are refused in kzoo's words."""

import os

import keras
import numpy as np
import pytest

import kzoo
from kzoo.layers import lora
from tests.models.bert.task_fixtures import VOCABULARY, topic_sentences, tiny_backbone

CLASSES = ["music", "sport", "food"]


def classifier(seed=1, hidden_dim=32):
    keras.utils.set_random_seed(seed)
    backbone = tiny_backbone(num_layers=1, hidden_dim=hidden_dim)
    return kzoo.BertClassifier(backbone, class_names=CLASSES, preprocessor=kzoo.BertTokenizer(VOCABULARY), dropout=0.0)


def values(variables):
    return [keras.ops.convert_to_numpy(v).copy() for v in variables]


def with_nonzero_factors(model):
    """Factors as after training (B is zero at first, so merging would check nothing)."""
    rng = np.random.default_rng(0)
    for layer in lora.adapted_layers(model):
        layer.lora_kernel_b.assign(rng.normal(scale=0.3, size=layer.lora_kernel_b.shape).astype("float32"))
    return model


@pytest.fixture(scope="module")
def trained():
    """A classifier with LoRA (rank 4) trained on the topic task, its frozen weights before, and its losses."""
    model = classifier()
    model.enable_lora(4)
    frozen = [v for v in model.weights if not v.trainable]
    before = values(frozen)
    x, y = topic_sentences(96, seed=0)
    model.compile(optimizer=keras.optimizers.Adam(5e-2), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(x, y, epochs=20, batch_size=16, shuffle=False, verbose=0)
    return model, frozen, before, history.history["loss"]


def test_only_the_factors_and_the_head_train_and_the_loss_falls(trained):
    model, frozen, before, losses = trained
    paths = [v.path for v in model.trainable_weights]
    assert paths == [
        f"transformer_layer_0/self_attention/{name}/lora_kernel_{factor}" for name in ("query", "value") for factor in "ab"
    ] + ["logits/kernel", "logits/bias"]
    for found, wanted in zip(values(frozen), before, strict=True):
        np.testing.assert_array_equal(found, wanted)  # W0, biases, embeddings, the pooler: untouched
    # From a random frozen backbone (the hard case). Measured (2026-11-27), mean of the last 3
    # epochs / first: 0.11 (JAX), 0.24 (torch).
    assert np.mean(losses[-3:]) < 0.4 * losses[0], losses


def test_compile_defaults_to_loras_learning_rate():
    from kzoo_cli.parser import LORA_RATE

    model = classifier()
    model.compile()
    assert float(model.optimizer.learning_rate) == pytest.approx(5e-5)  # BERT's, for every weight
    model.enable_lora(2)  # after compile: the first fit's scheduled optimizer is LoRA's
    x, y = topic_sentences(8, seed=0)
    model.fit(x, y, epochs=1, batch_size=8, verbose=0)
    schedule = model.optimizer.get_config()["learning_rate"]["config"]
    assert schedule["peak_learning_rate"] == pytest.approx(2e-3) == LORA_RATE


def test_adapter_file_is_small_and_loads_onto_the_same_preset(trained, tmp_path):
    model, _, _, _ = trained
    texts = topic_sentences(16, seed=5)[0]
    path = tmp_path / "topics.lora.h5"
    model.save_lora_weights(path)
    assert os.path.getsize(path) < 20_000  # the factors and the head; the model's weights take ~170 kB
    fresh = classifier()  # the same "preset" (seed), LoRA off
    fresh.load_lora_weights(path)
    assert fresh.backbone.get_config()["lora"] == {"rank": 4, "alpha": 4, "target_layer_names": ["query", "value"]}
    np.testing.assert_allclose(fresh.predict(texts, verbose=0), model.predict(texts, verbose=0), atol=1e-6)
    other = classifier(hidden_dim=16)
    with pytest.raises(ValueError, match="was saved from another model than this BertClassifier"):
        other.load_lora_weights(path)
    with pytest.raises(ValueError, match=r"ends with '\.lora\.h5'"):
        model.save_lora_weights(tmp_path / "topics.h5")
    with pytest.raises(ValueError, match="has no LoRA to save"):
        classifier().save_lora_weights(tmp_path / "none.lora.h5")


def test_presets_and_weights_files_keep_the_factors_exactly(trained, tmp_path):
    model, _, _, _ = trained
    model.save_to_preset(tmp_path / "preset")
    again = kzoo.BertClassifier.from_preset(tmp_path / "preset")
    assert again.get_config() == model.get_config()
    for found, wanted in zip(values(again.weights), values(model.weights), strict=True):
        np.testing.assert_array_equal(found, wanted)  # W0, A and B as they were, not merged
    again.save_weights(tmp_path / "backup.weights.h5")  # what BackupAndRestore writes and reads
    for layer in lora.adapted_layers(again):
        layer.lora_kernel_a.assign(np.zeros(layer.lora_kernel_a.shape))
    again.load_weights(tmp_path / "backup.weights.h5")
    for found, wanted in zip(values(again.weights), values(model.weights), strict=True):
        np.testing.assert_array_equal(found, wanted)


def test_keras_file_keeps_the_outputs_and_training_goes_on(trained, tmp_path):
    model, _, _, _ = trained
    texts, labels = topic_sentences(32, seed=6)
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    np.testing.assert_allclose(loaded.predict(texts, verbose=0), model.predict(texts, verbose=0), atol=1e-5)
    # Keras loads the merged kernel and zeroes A and B; a fresh A lets them train again.
    loaded.fit(texts, labels, epochs=1, batch_size=16, verbose=0)
    assert all(np.abs(keras.ops.convert_to_numpy(layer.lora_kernel_b)).max() > 0
               for layer in lora.adapted_layers(loaded))


def test_merged_model_and_exports_compute_the_same(tmp_path):
    model = classifier()
    model.enable_lora(2)
    with_nonzero_factors(model)
    texts = topic_sentences(16, seed=7)[0]
    expected = model.predict(texts, verbose=0)
    merged = model.merge_lora()
    assert lora.adapted_layers(merged) == [] and "lora" not in merged.backbone.get_config()
    assert len(lora.adapted_layers(model)) == 2  # unchanged
    np.testing.assert_allclose(merged.predict(texts, verbose=0), expected, atol=1e-5)
    model.save_to_preset(tmp_path / "hf", format="huggingface")  # read back by kzoo's own converter
    from_hf = kzoo.BertClassifier.from_preset(tmp_path / "hf")
    np.testing.assert_allclose(from_hf.predict(texts, verbose=0), expected, atol=1e-5)


def test_int8_backbone_trains_under_lora_and_round_trips(tmp_path):
    model = classifier()
    model.backbone.quantize("int8")
    model.enable_lora(4)
    assert {str(layer._kernel.dtype) for layer in lora.adapted_layers(model)} == {"int8"}
    x, y = topic_sentences(96, seed=0)
    model.compile(optimizer=keras.optimizers.Adam(5e-2), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    losses = model.fit(x, y, epochs=20, batch_size=16, shuffle=False, verbose=0).history["loss"]
    assert np.mean(losses[-3:]) < 0.4 * losses[0], losses
    texts = x[:16]
    model.save_to_preset(tmp_path / "preset")
    again = kzoo.BertClassifier.from_preset(tmp_path / "preset")
    np.testing.assert_array_equal(again.predict(texts, verbose=0), model.predict(texts, verbose=0))
    # Merged: the kernel re-quantized to int8 (Keras'), so within int8's rounding.
    merged = keras.ops.convert_to_numpy(keras.ops.softmax(model.merge_lora().predict(texts, verbose=0)))
    unmerged = keras.ops.convert_to_numpy(keras.ops.softmax(model.predict(texts, verbose=0)))
    assert np.abs(merged - unmerged).max() < 0.02


def test_transformer_adapts_every_attention():
    keras.utils.set_random_seed(0)
    model = kzoo.Transformer(vocabulary_size=20, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                             max_sequence_length=16)
    model.enable_lora(2)
    adapted = sorted(v.path for v in model.trainable_weights)
    assert len(adapted) == 12 and all("lora_kernel" in path for path in adapted)  # self and cross attention, q and v
    assert kzoo.Transformer.from_config(model.get_config()).get_config() == model.get_config()


@pytest.mark.parametrize("arguments, message", [
    ({"rank": 0}, "needs rank, a positive int"),
    ({"rank": 2.5}, "needs rank, a positive int"),
    ({"rank": 2, "alpha": -1}, "alpha must be a positive number"),
    ({"rank": 2, "target_layer_names": "query"}, "must be a non-empty list"),
    ({"rank": 2, "target_layer_names": ["qurey"]}, r"named \['qurey'\]; LoRA adapts \['attention_output', "),
])
def test_bad_arguments_are_refused(arguments, message):
    model = classifier()
    with pytest.raises(ValueError, match=message):
        model.enable_lora(**arguments)
    assert lora.adapted_layers(model) == [] and all(v.trainable for v in model.backbone.weights)


def test_mistakes_in_order_are_refused():
    model = classifier()
    model.enable_lora(2)
    with pytest.raises(ValueError, match="LoRA is on already"):
        model.enable_lora(2)
    with pytest.raises(ValueError, match="quantize its base before enable_lora"):
        model.quantize("int8")
    whole = classifier()
    whole.quantize("int8")
    with pytest.raises(ValueError, match=r"head \(logits\) is int8.*model.backbone.quantize\('int8'\)"):
        whole.enable_lora(2)
    trained = classifier()
    trained.fit(*topic_sentences(8, seed=0), epochs=1, verbose=0)
    with pytest.raises(ValueError, match="optimizer is built for its present trainable weights"):
        trained.enable_lora(2)
