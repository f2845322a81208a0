"""Preset directories (KerasHub's layout): save / load round trips of the BERT
backbone (BERT sec. 3), tokenizer, preprocessor and a task, moved directories,
the backbone-only -> fresh-head path, every error, and loading on the other
backends."""

import json
import os
import shutil
import warnings

import h5py
import keras
import numpy as np
import pytest
from keras import ops

from kzoo import BertBackbone, BertPreprocessor, BertTokenizer, presets
from kzoo.presets import save_backbone, save_task
from kzoo.presets.directory import load_task
from tests.models.bert.test_bert_backbone import padded_batch

TINY = dict(
    vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32,
    max_sequence_length=16,
)
VOCABULARY = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat",
    "un", "##believ", "##able", "!", "café", "字", ".",
]
SENTENCES = ["The cat sat on the mat.", "Unbelievable!", "Café 字字 zzz", ""]


@keras.saving.register_keras_serializable(package="kzoo_tests")
class TinyClassifier(keras.Model):
    """A task as kzoo's are built: a backbone, a Dense head on the pooled
    output, an optional preprocessor, and `from_preset` / `save_to_preset`."""

    def __init__(self, backbone, num_classes=2, preprocessor=None, **kwargs):
        logits = keras.layers.Dense(num_classes, name="logits")(
            backbone(backbone.input)["pooled_output"]
        )
        super().__init__(inputs=backbone.input, outputs=logits, **kwargs)
        self.backbone = backbone
        self.preprocessor = preprocessor
        self.num_classes = num_classes

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "num_classes": self.num_classes,
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            "preprocessor": keras.saving.serialize_keras_object(self.preprocessor),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for key in ("backbone", "preprocessor"):
            config[key] = keras.saving.deserialize_keras_object(config[key])
        return cls(**config)

    @classmethod
    def from_preset(cls, preset, /, **kwargs):
        return presets.load(cls, preset, **kwargs)

    def save_to_preset(self, preset_dir):
        presets.save_task(self, preset_dir)


def tiny_backbone():
    keras.utils.set_random_seed(7)
    return BertBackbone(**TINY)


def tiny_preprocessor(sequence_length=12):
    return BertPreprocessor(BertTokenizer(VOCABULARY), sequence_length=sequence_length)


def numpy_outputs(model, inputs):
    return keras.tree.map_structure(ops.convert_to_numpy, model(inputs))


def max_difference(a, b):
    return max(
        float(np.max(np.abs(x.astype("float64") - y.astype("float64"))))
        for x, y in zip(keras.tree.flatten(a), keras.tree.flatten(b))
    )


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture
def saved_backbone(tmp_path):
    """(backbone, its outputs on `padded_batch()`, the preset directory)."""
    backbone = tiny_backbone()
    backbone.save_to_preset(tmp_path / "preset")
    return backbone, numpy_outputs(backbone, padded_batch()), tmp_path / "preset"


# 1. Round trips ----------------------------------------------------------------


def test_backbone_round_trip(saved_backbone, tmp_path):
    backbone, outputs, path = saved_backbone
    assert sorted(os.listdir(path)) == ["config.json", "metadata.json", "model.weights.h5"]
    config = read_json(path / "config.json")
    assert config["class_name"] == "BertBackbone"
    assert config["registered_name"] == "kzoo>BertBackbone"
    assert config["config"]["num_layers"] == 2 and "build_config" not in config
    metadata = read_json(path / "metadata.json")
    assert metadata["classes"] == {"backbone": "BertBackbone"}
    assert metadata["parameter_count"] == backbone.count_params()
    assert metadata["backend"] == keras.backend.backend()
    assert metadata["keras_version"] == keras.version()
    assert metadata["kzoo_version"] and metadata["date_saved"]

    restored = BertBackbone.from_preset(str(path))
    assert restored.get_config() == backbone.get_config()
    assert max_difference(numpy_outputs(restored, padded_batch()), outputs) <= 1e-6

    moved = tmp_path / "elsewhere" / "moved"
    shutil.move(path, moved)  # paths inside are relative: a moved directory loads
    assert max_difference(numpy_outputs(BertBackbone.from_preset(moved), padded_batch()), outputs) <= 1e-6


def test_backbone_overrides_and_dtype(saved_backbone):
    backbone, outputs, path = saved_backbone
    restored = BertBackbone.from_preset(path, dropout=0.0, dtype="mixed_bfloat16")
    assert restored.dropout == 0.0
    assert restored.token_embedding.dtype_policy.name == "mixed_bfloat16"
    restored_outputs = numpy_outputs(restored, padded_batch())
    assert 0 < max_difference(restored_outputs, outputs) < 0.1  # the same weights, in bfloat16


def test_tokenizer_round_trip(tmp_path):
    vocabulary_file = tmp_path / "vocab.txt"
    vocabulary_file.write_text("\n".join(VOCABULARY) + "\n", encoding="utf-8")
    tokenizer = BertTokenizer(str(vocabulary_file), lowercase=False, strip_accents=True)
    tokenizer.save_to_preset(tmp_path / "preset")
    os.remove(vocabulary_file)  # the preset holds its own copy

    asset = tmp_path / "preset" / "assets" / "tokenizer" / "vocabulary.txt"
    assert asset.read_text(encoding="utf-8").split("\n")[:-1] == VOCABULARY
    config = read_json(tmp_path / "preset" / "tokenizer.json")
    assert config["config"]["vocabulary"] == "assets/tokenizer/vocabulary.txt"
    assert config["registered_name"] == "kzoo>BertTokenizer"

    shutil.move(tmp_path / "preset", tmp_path / "moved")
    restored = BertTokenizer.from_preset(tmp_path / "moved")
    assert restored.get_config() == tokenizer.get_config()
    assert restored(SENTENCES).to_list() == tokenizer(SENTENCES).to_list()
    assert restored(SENTENCES).to_list()[1] == [1, 13]  # cased: "Unbelievable" is unknown


def test_preprocessor_round_trip(tmp_path):
    preprocessor = tiny_preprocessor()
    preprocessor.save_to_preset(tmp_path)
    assert sorted(os.listdir(tmp_path)) == [
        "assets", "metadata.json", "preprocessor.json", "tokenizer.json",
    ]
    config = read_json(tmp_path / "preprocessor.json")
    assert config["config"]["tokenizer"]["config"]["vocabulary"] == "assets/tokenizer/vocabulary.txt"

    restored = BertPreprocessor.from_preset(tmp_path)
    assert restored.sequence_length == 12
    for x in (SENTENCES, (SENTENCES, SENTENCES[::-1]), "the cat"):
        packed, expected = restored(x), preprocessor(x)
        assert {k: v.numpy().tolist() for k, v in packed.items()} == {
            k: v.numpy().tolist() for k, v in expected.items()
        }
    assert BertPreprocessor.from_preset(tmp_path, sequence_length=5).sequence_length == 5
    # The tokenizer saved with it loads on its own too.
    assert BertTokenizer.from_preset(tmp_path).get_vocabulary() == VOCABULARY


# 2. Tasks ----------------------------------------------------------------------


def test_task_round_trip(tmp_path):
    task = TinyClassifier(tiny_backbone(), num_classes=3, preprocessor=tiny_preprocessor())
    inputs = task.preprocessor(SENTENCES)
    logits = ops.convert_to_numpy(task(inputs))
    task.save_to_preset(tmp_path / "preset")
    path = tmp_path / "preset"
    assert sorted(os.listdir(path)) == [
        "assets", "config.json", "metadata.json", "model.weights.h5", "preprocessor.json",
        "task.json", "task.weights.h5", "tokenizer.json",
    ]
    task_config = read_json(path / "task.json")
    assert task_config["config"]["preprocessor"]["config"]["tokenizer"]["config"]["vocabulary"] == (
        "assets/tokenizer/vocabulary.txt"
    )
    metadata = read_json(path / "metadata.json")
    assert metadata["classes"] == {
        "task": "TinyClassifier", "backbone": "BertBackbone",
        "preprocessor": "BertPreprocessor", "tokenizer": "BertTokenizer",
    }
    assert metadata["task_parameter_count"] == task.count_params()
    assert metadata["parameter_count"] == task.backbone.count_params()

    shutil.move(path, tmp_path / "moved")
    restored = TinyClassifier.from_preset(tmp_path / "moved")
    assert restored.num_classes == 3 and isinstance(restored.backbone, BertBackbone)
    restored_inputs = restored.preprocessor(SENTENCES)
    assert max_difference(ops.convert_to_numpy(restored(restored_inputs)), logits) <= 1e-6


def test_task_from_backbone_only_gets_a_fresh_head(saved_backbone):
    backbone, outputs, path = saved_backbone
    tiny_preprocessor().save_to_preset(path)
    task = load_task(TinyClassifier, path, num_classes=5)
    assert task.num_classes == 5 and task.output.shape == (None, 5)
    assert isinstance(task.preprocessor, BertPreprocessor)  # attached from the directory
    assert max_difference(numpy_outputs(task.backbone, padded_batch()), outputs) <= 1e-6
    # Another task's directory (here a functional model) gives its backbone, a fresh head.
    other = keras.Model(backbone.input, keras.layers.Dense(4)(backbone(backbone.input)["pooled_output"]))
    other.backbone = backbone
    save_task(other, path.parent / "other")
    task = TinyClassifier.from_preset(path.parent / "other", num_classes=2)
    assert task.output.shape == (None, 2) and task.preprocessor is None
    assert max_difference(numpy_outputs(task.backbone, padded_batch()), outputs) <= 1e-6


def test_task_from_a_name_without_its_weights_is_random():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # load_weights=False: no "random weights" warning
        task = TinyClassifier.from_preset("bert_tiny", num_classes=4, dtype="mixed_bfloat16", load_weights=False)
    assert task.backbone.num_layers == 2 and task.backbone.hidden_dim == 128
    assert task.backbone.dtype_policy.name == "mixed_bfloat16"  # `dtype` goes to the backbone
    assert task.output.shape == (None, 4)


def test_resaving_a_task_removes_parts_it_does_not_have(tmp_path):
    task = TinyClassifier(tiny_backbone(), preprocessor=tiny_preprocessor())
    task.save_to_preset(tmp_path)
    task.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    task.optimizer.build(task.trainable_variables)  # optimizer state, as after `fit`
    bare = TinyClassifier(task.backbone)
    bare.save_to_preset(tmp_path)
    assert sorted(os.listdir(tmp_path)) == [
        "config.json", "metadata.json", "model.weights.h5", "task.json", "task.weights.h5",
    ]
    task.save_to_preset(tmp_path)  # compiled, with optimizer state: not saved
    with h5py.File(tmp_path / "task.weights.h5") as f:
        assert "optimizer" not in f
    assert TinyClassifier.from_preset(tmp_path).preprocessor is not None


# 3. Errors ---------------------------------------------------------------------


def test_unknown_name_or_missing_directory(tmp_path):
    with pytest.raises(ValueError, match=r"'bert_tinyy'. Did you mean: 'bert_tiny'.*must contain config.json"):
        BertBackbone.from_preset("bert_tinyy")
    with pytest.raises(ValueError, match=r"Preset directory '.*nowhere' does not exist.*config.json"):
        BertBackbone.from_preset(str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match=r"is not a preset directory: it has no config.json"):
        BertBackbone.from_preset(tmp_path)
    with pytest.raises(ValueError, match=r"describes a BertBackbone, not a BertTokenizer.*preset directory"):
        BertTokenizer.from_preset("bert_l6_h768_a3")  # architecture only: no vocabulary


def test_directory_of_another_class(tmp_path):
    save_backbone(keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]), tmp_path / "a")
    with pytest.raises(ValueError, match=r"holds no BertBackbone: it has config.json \(Sequential\)"):
        BertBackbone.from_preset(tmp_path / "a")
    tiny_preprocessor().save_to_preset(tmp_path / "b")
    with pytest.raises(ValueError, match=r"holds no BertBackbone: it has preprocessor.json \(BertPreprocessor\), tokenizer.json"):
        BertBackbone.from_preset(tmp_path / "b")
    with pytest.raises(ValueError, match=r"has no config.json: a TinyClassifier needs a saved backbone"):
        TinyClassifier.from_preset(tmp_path / "b")


def test_missing_or_damaged_files(saved_backbone):
    _, _, path = saved_backbone
    weights = path / "model.weights.h5"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"model.weights.h5.*corrupt or truncated.*Re-save the preset"):
        BertBackbone.from_preset(path)
    os.remove(weights)
    with pytest.raises(ValueError, match=r"model.weights.h5' is missing.*Re-save the preset"):
        BertBackbone.from_preset(path)
    (path / "config.json").write_text('{"class_name": "BertBack')
    with pytest.raises(ValueError, match=r"config.json' is not valid JSON.*Re-save"):
        BertBackbone.from_preset(path)


def test_missing_vocabulary(tmp_path):
    tiny_preprocessor().save_to_preset(tmp_path)
    os.remove(tmp_path / "assets" / "tokenizer" / "vocabulary.txt")
    with pytest.raises(ValueError, match=r"refers to assets/tokenizer/vocabulary.txt, which is missing"):
        BertPreprocessor.from_preset(tmp_path)


def test_weights_that_do_not_match_the_config(saved_backbone):
    _, _, path = saved_backbone
    with pytest.raises(ValueError, match=r"'layers/token_embedding/vars/0': expected shape \(60, 16\), found \(50, 16\)"):
        BertBackbone.from_preset(path, vocabulary_size=60)
    # A file with more layers than the config: Keras alone would load it silently.
    config = read_json(path / "config.json")
    config["config"]["num_layers"] = 1
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"(?s)do not match the model config.json describes \(16 variable\(s\) differ\)"
                       r".*intermediate_dense/vars/0': not in the model, found \(16, 32\)"):
        BertBackbone.from_preset(path)
    with pytest.raises(ValueError, match=r"Unknown override\(s\) \['num_layer'\]"):
        BertBackbone.from_preset(path, num_layer=3)


def test_saving_refuses_foreign_directories(tmp_path, saved_backbone):
    backbone, _, path = saved_backbone
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match=r"Refusing to save a preset into .*\['notes.txt'\], which are not preset files"):
        backbone.save_to_preset(tmp_path / "mine")
    assert os.listdir(tmp_path / "mine") == ["notes.txt"]
    with pytest.raises(ValueError, match=r"it is a file"):
        backbone.save_to_preset(tmp_path / "mine" / "notes.txt")
    # A task directory only takes a whole task: a part alone would leave task.weights.h5 stale.
    TinyClassifier(backbone).save_to_preset(tmp_path / "task")
    with pytest.raises(ValueError, match=r"holds a saved task.*task.save_to_preset"):
        tiny_preprocessor().save_to_preset(tmp_path / "task")
    with pytest.raises(ValueError, match=r"save_task saves a keras.Model with a `backbone`"):
        save_task(backbone, tmp_path / "new")
    with pytest.raises(ValueError, match=r"token\(s\) \['a\\nb'\] contain a line break"):
        BertTokenizer(VOCABULARY + ["a\nb"]).save_to_preset(tmp_path / "new")
    assert not os.path.exists(tmp_path / "new")  # nothing was written
    backbone.save_to_preset(path)  # an existing preset directory is overwritten
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        BertBackbone.from_preset(path)
