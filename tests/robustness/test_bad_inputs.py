"""Bad examples, labels, presets and config files given to kzoo's tasks and
models: `predict`, `evaluate` and `fit` on no
examples, missing values, misaligned columns and labels, one-hot labels, edited
config files. Each is refused in kzoo's words before any work, the same on
every backend; the table runs on every backend (see `case_table`)."""

import functools
import json
import os
import tempfile

import numpy as np
import pytest
import tensorflow as tf

import kzoo
from tests.models.bert.task_fixtures import tiny_backbone
from tests.robustness.case_table import Case, Gives, Raises, check, parametrize

TEXTS = ["the film", "a song"]
ONE_HOT = np.eye(3, dtype="float32")[[0, 1]]
PACKED = {"token_ids": np.array([[2, 5, 3], [2, 25, 3]])}


def predict_shape(model, x):
    return tuple(model.predict(x, verbose=0).shape)


@functools.lru_cache(maxsize=None)
def saved_backbone():
    path = tempfile.mkdtemp()
    tiny_backbone(num_layers=1, hidden_dim=8).save_to_preset(path)
    return path


def edited_preset(**fields):
    """A copy of the saved backbone preset with `config.json` fields changed
    (a value of None deletes the field)."""
    path = tempfile.mkdtemp()
    for name in os.listdir(saved_backbone()):
        with open(os.path.join(saved_backbone(), name), "rb") as source, open(os.path.join(path, name), "wb") as copy:
            copy.write(source.read())
    config_path = os.path.join(path, "config.json")
    with open(config_path) as f:
        config = json.load(f)
    for name, value in fields.items():
        if value is None:
            del config["config"][name]
        else:
            config["config"][name] = value
    with open(config_path, "w") as f:
        json.dump(config, f)
    return path


@functools.lru_cache(maxsize=None)
def saved_huggingface():
    path = tempfile.mkdtemp()
    tiny_backbone(num_layers=1, hidden_dim=8).save_to_preset(path, format="huggingface")
    return path


def edited_huggingface(**fields):
    """A copy of the Hugging Face checkpoint with `config.json` fields
    changed (a value of None deletes the field)."""
    path = tempfile.mkdtemp()
    for name in os.listdir(saved_huggingface()):
        with open(os.path.join(saved_huggingface(), name), "rb") as source, open(os.path.join(path, name), "wb") as copy:
            copy.write(source.read())
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    for name, value in fields.items():
        if value is None:
            del config[name]
        else:
            config[name] = value
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f)
    return path


def corrupt_preset():
    path = edited_preset()
    with open(os.path.join(path, "config.json"), "w") as f:
        f.write("{not json")
    return path


def from_pandas(models):
    pandas = pytest.importorskip("pandas")
    return models.classifier.predict(pandas.Series(["the film", None]), verbose=0)


def labels_dataset(labels):
    return tf.data.Dataset.from_tensor_slices((TEXTS, labels)).batch(2)


CONFIG_INT = "In a config.json, write a JSON integer"
EXAMPLE_CASES = [
    Case("predict_none_among_texts", lambda m: m.classifier.predict(["the film", None], verbose=0),
         Raises(ValueError, "BertClassifier expected strings, but x[1] is None (NoneType).", "missing value")),
    Case("predict_float_among_texts", lambda m: m.classifier.predict(["the film", 3.5], verbose=0),
         Raises(ValueError, "BertClassifier expected strings, but x[1] is 3.5 (float).")),
    Case("predict_nan_from_object_array", lambda m: m.classifier.predict(np.array(["a", np.nan], object), verbose=0),
         Raises(ValueError, "x[1] is nan (float).", 'fillna("")')),
    Case("predict_pandas_series_with_a_missing_value", from_pandas, Raises(ValueError, "x[1] is nan (float).")),
    Case("predict_none_in_second_pair_column",
         lambda m: m.classifier.predict((["the film", "a"], ["a song", None]), verbose=0),
         Raises(ValueError, "BertClassifier expected strings, but x[1][1] is None")),
    Case("predict_none", lambda m: m.classifier.predict(None, verbose=0),
         Raises(ValueError, "BertClassifier got no examples (x=None)")),
    Case("predict_empty_list", lambda m: m.classifier.predict([], verbose=0),
         Raises(ValueError, "BertClassifier got 0 examples")),
    Case("predict_empty_pair", lambda m: m.classifier.predict(([], []), verbose=0),
         Raises(ValueError, "BertClassifier got 0 examples")),
    Case("predict_empty_packed_batch", lambda m: m.classifier.predict({"token_ids": np.zeros((0, 5), int)}, verbose=0),
         Raises(ValueError, "BertClassifier got 0 examples")),
    Case("predict_one_bare_string", lambda m: m.classifier.predict("the film", verbose=0),
         Raises(ValueError, "got one string. Wrap it in a list: ['the film']")),
    Case("predict_pairs_of_different_lengths",
         lambda m: m.classifier.predict((["a b", "the", "film"], ["a", "the"]), verbose=0),
         Raises(ValueError, "a tuple of columns of different lengths: 3, 2")),
    Case("predict_packed_without_token_ids", lambda m: m.classifier.predict({"segment_ids": np.zeros((1, 3))}),
         Raises(ValueError, "(`token_ids` required); got keys ['segment_ids']")),
    Case("predict_packed_shapes_differ",
         lambda m: m.classifier.predict({**PACKED, "padding_mask": np.ones((2, 4))}, verbose=0),
         Raises(ValueError, "token_ids has shape (2, 3) but padding_mask has shape (2, 4)")),
    Case("predict_fractional_packed_ids", lambda m: m.classifier.predict({"token_ids": [[2, 5.5, 3]]}, verbose=0),
         Raises(ValueError, "must be integer ids; got 5.5 at index (0, 1)")),
    Case("predict_unbatched_dataset", lambda m: m.classifier.predict(tf.data.Dataset.from_tensor_slices(TEXTS)),
         Raises(ValueError, "takes batched datasets: call `dataset.batch(32)` first")),
    Case("predict_text_without_preprocessor",
         lambda m: kzoo.BertClassifier(m.classifier.backbone, num_classes=3).predict(TEXTS, verbose=0),
         Raises(ValueError, "has no preprocessor, so it takes packed inputs only")),
    Case("predict_texts", lambda m: predict_shape(m.classifier, TEXTS), Gives([2, 3])),
    Case("predict_string_tensor", lambda m: predict_shape(m.classifier, tf.constant(TEXTS)), Gives([2, 3])),
    Case("predict_batch_size_zero", lambda m: m.classifier.predict(TEXTS, batch_size=0, verbose=0),
         Raises(ValueError, "batch_size must be an int >= 1; got 0")),
    Case("evaluate_empty", lambda m: m.classifier.evaluate([], [], verbose=0),
         Raises(ValueError, "BertClassifier got 0 examples")),
    Case("fit_none", lambda m: m.classifier.fit(None, [0], verbose=0), Raises(ValueError, "got no examples (x=None)")),
    Case("fit_more_texts_than_labels", lambda m: m.classifier.fit(TEXTS, [0], verbose=0),
         Raises(ValueError, "BertClassifier got 2 examples but 1 labels")),
    Case("fit_none_among_labels", lambda m: m.classifier.fit(TEXTS, [0, None], verbose=0),
         Raises(ValueError, "expected numbers or strings, but y[1] is None")),
    Case("fit_none_among_sample_weights",
         lambda m: m.classifier.fit(TEXTS, [0, 1], sample_weight=[1.0, None], verbose=0),
         Raises(ValueError, "sample_weight[1] is None")),
    Case("fit_negative_epochs", lambda m: m.classifier.fit(TEXTS, [0, 1], epochs=-1, verbose=0),
         Raises(ValueError, "epochs must be an int >= 0; got -1")),
    Case("fit_fractional_batch_size", lambda m: m.classifier.fit(TEXTS, [0, 1], batch_size=1.5, verbose=0),
         Raises(ValueError, "batch_size must be an int >= 1; got 1.5 (float)")),
]

ONE_HOT_MESSAGE = (
    "labels must be one class id per example, shape (batch,); got shape (2, 3)",
    "They look one-hot: pass labels.argmax(axis=-1)",
)
LABEL_CASES = [
    Case("one_hot_labels_with_texts", lambda m: m.classifier.fit(TEXTS, ONE_HOT, verbose=0),
         Raises(ValueError, *ONE_HOT_MESSAGE)),
    Case("one_hot_labels_with_packed_inputs", lambda m: m.classifier.fit(PACKED, ONE_HOT, verbose=0),
         Raises(ValueError, *ONE_HOT_MESSAGE)),
    Case("one_hot_labels_in_a_dataset", lambda m: m.classifier.fit(labels_dataset(ONE_HOT), verbose=0),
         Raises(ValueError, "labels must be one class id per example", "got shape (None, 3)")),
    Case("one_hot_labels_to_evaluate", lambda m: m.classifier.evaluate(TEXTS, ONE_HOT.tolist(), verbose=0),
         Raises(ValueError, *ONE_HOT_MESSAGE)),
    Case("label_beyond_classes", lambda m: m.classifier.fit(TEXTS, [0, 3], verbose=0),
         Raises(ValueError, "labels must be integers in [0, 2] (num_classes=3)", "Got labels from 0 to 3")),
    Case("negative_label", lambda m: m.classifier.fit(TEXTS, [-1, 0], verbose=0),
         Raises(ValueError, "labels must be integers in [0, 2]", "Got labels from -1 to 0")),
    Case("fractional_label", lambda m: m.classifier.fit(TEXTS, [0, 0.5], verbose=0),
         Raises(ValueError, "Labels must be integer class ids; got values such as [0.0, 0.5]")),
    Case("class_name_labels_without_class_names", lambda m: m.classifier.fit(TEXTS, ["music", "food"], verbose=0),
         Raises(ValueError, "got labels as strings", "but it has no class_names")),
]

PRESET_CASES = [
    Case("config_int_as_string", lambda m: kzoo.BertBackbone.from_preset(edited_preset(num_layers="1")),
         Raises(ValueError, "BertBackbone: num_layers must be an int >= 0; got '1' (str)", CONFIG_INT)),
    Case("config_int_as_float", lambda m: kzoo.BertBackbone.from_preset(edited_preset(num_heads=2.0)),
         Raises(ValueError, "BertBackbone: num_heads must be an int >= 1; got 2.0 (float)", CONFIG_INT)),
    Case("config_fractional_size", lambda m: kzoo.BertBackbone.from_preset(edited_preset(hidden_dim=8.5)),
         Raises(ValueError, "hidden_dim must be an int >= 1; got 8.5 (float)")),
    Case("config_negative_heads", lambda m: kzoo.BertBackbone.from_preset(edited_preset(num_heads=-2)),
         Raises(ValueError, "num_heads must be an int >= 1; got -2 (int)")),
    Case("config_missing_field", lambda m: kzoo.BertBackbone.from_preset(edited_preset(num_layers=None)),
         Raises(ValueError, "The BertBackbone config lacks ['num_layers'] (was its config.json edited?)")),
    Case("config_unknown_field", lambda m: kzoo.BertBackbone.from_preset(edited_preset(num_layerz=1)),
         Raises(ValueError, "The BertBackbone config has unknown field(s) ['num_layerz']")),
    Case("config_not_json", lambda m: kzoo.BertBackbone.from_preset(corrupt_preset()),
         Raises(ValueError, "config.json' is not valid JSON", "Re-save the preset")),
    Case("override_as_float", lambda m: kzoo.BertBackbone.from_preset(saved_backbone(), max_sequence_length=16.0),
         Raises(ValueError, "max_sequence_length must be an int >= 1; got 16.0 (float)")),
    Case("unknown_override", lambda m: kzoo.BertBackbone.from_preset(saved_backbone(), num_layerz=3),
         Raises(ValueError, "Unknown override(s) ['num_layerz']")),
    Case("preset_name_typo", lambda m: kzoo.BertBackbone.from_preset("bert_tiny_uncasd"),
         Raises(ValueError, "Unknown preset 'bert_tiny_uncasd'. Did you mean", "'bert_tiny'")),
    Case("preset_directory_missing", lambda m: kzoo.BertBackbone.from_preset("./no/such/preset"),
         Raises(ValueError, "Preset directory './no/such/preset' does not exist")),
    Case("preset_directory_empty", lambda m: kzoo.BertBackbone.from_preset(tempfile.mkdtemp()),
         Raises(ValueError, "is not a preset directory: it has no config.json")),
    Case("new_head_without_num_classes", lambda m: kzoo.BertClassifier.from_preset(saved_backbone()),
         Raises(ValueError, "a new head needs `num_classes`")),
    Case("tokenizer_from_a_backbone_preset", lambda m: kzoo.BertTokenizer.from_preset(saved_backbone()),
         Raises(ValueError, "holds no BertTokenizer")),
    Case("backbone_vocabulary_size_zero", lambda m: tiny_backbone(vocabulary_size=0),
         Raises(ValueError, "vocabulary_size must be an int >= 1; got 0")),
    Case("transformer_layers_as_float", lambda m: kzoo.Transformer(vocabulary_size=7, num_layers=1.0),
         Raises(ValueError, "Transformer: num_layers must be an int >= 0; got 1.0 (float)")),
    Case("transformer_vocabulary_as_string", lambda m: kzoo.Transformer(vocabulary_size="7"),
         Raises(ValueError, "Transformer: vocabulary_size must be an int >= 1; got '7' (str)")),
    Case("num_classes_as_float", lambda m: kzoo.BertClassifier(m.classifier.backbone, num_classes=2.0),
         Raises(ValueError, "num_classes must be a positive int", "got 2.0")),
    # A checkpoint of another format: its own field names, not kzoo's arguments.
    Case("huggingface_field_as_word",
         lambda m: kzoo.BertBackbone.from_preset(edited_huggingface(num_hidden_layers="two")),
         Raises(ValueError, "config.json: num_hidden_layers must be a JSON integer >= 0; got 'two' (str)",
                "never rounded or parsed")),
    Case("huggingface_size_as_float", lambda m: kzoo.BertBackbone.from_preset(edited_huggingface(hidden_size=8.0)),
         Raises(ValueError, "config.json: hidden_size must be a JSON integer >= 1; got 8.0 (float)")),
    Case("huggingface_dropout_as_string",
         lambda m: kzoo.BertBackbone.from_preset(edited_huggingface(hidden_dropout_prob="0.1")),
         Raises(ValueError, "config.json: hidden_dropout_prob must be a JSON number >= 0; got '0.1' (str)")),
    Case("huggingface_without_vocab_size", lambda m: kzoo.BertBackbone.from_preset(edited_huggingface(vocab_size=None)),
         Raises(ValueError, "config.json has no vocab_size")),
    Case("huggingface_checkpoint_loads", lambda m: kzoo.BertBackbone.from_preset(saved_huggingface()).num_layers,
         Gives(1)),
    Case("saved_backbone_loads", lambda m: kzoo.BertBackbone.from_preset(saved_backbone()).num_layers, Gives(1)),
]


@parametrize(EXAMPLE_CASES + LABEL_CASES + PRESET_CASES)
def test_bad_inputs(case):
    check(case)


def test_the_table_has_at_least_90_cases():
    from tests.robustness import test_bad_ids, test_bad_texts

    tables = [
        EXAMPLE_CASES, LABEL_CASES, PRESET_CASES,
        test_bad_ids.BERT_ID_CASES, test_bad_ids.TRANSFORMER_CASES, test_bad_ids.GENERATION_CASES,
        test_bad_texts.TEXT_CASES, test_bad_texts.PAIR_AND_LENGTH_CASES, test_bad_texts.VOCABULARY_CASES,
    ]
    assert sum(len(table) for table in tables) >= 90
