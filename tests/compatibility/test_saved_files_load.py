"""Presets and `.keras` files saved before the base-class redesign load with
the outputs they gave then (recorded under TensorFlow; every backend within
2e-5, generated tokens exactly). See make_saved_before_redesign.py."""

import os

import keras
import numpy as np
import pytest

import kzoo
from tests.compatibility.make_saved_before_redesign import HERE, PAIRS, TEXTS

EXPECTED = np.load(os.path.join(HERE, "expected_outputs.npz"))
TOLERANCE = 2e-5


def close(actual, name):
    np.testing.assert_allclose(keras.ops.convert_to_numpy(actual), EXPECTED[name], atol=TOLERANCE, rtol=0, err_msg=name)


def packed():
    preprocessor = kzoo.BertPreprocessor.from_preset(os.path.join(HERE, "bert_classifier"))
    batch = {k: np.asarray(v) for k, v in preprocessor(PAIRS).items()}
    np.testing.assert_array_equal(batch["token_ids"], EXPECTED["packed_pairs"])
    return batch


def test_bert_pretrainer_and_backbone_presets():
    path = os.path.join(HERE, "bert_pretrainer")
    batch = packed()
    pretrainer = kzoo.BertPretrainer.from_preset(path)
    outputs = pretrainer({**batch, "mask_positions": np.array([[1, 2], [3, 1]], "int32")})
    close(outputs["mlm_logits"], "bert_pretrainer/mlm_logits")
    close(outputs["nsp_logits"], "bert_pretrainer/nsp_logits")
    backbone_outputs = kzoo.BertBackbone.from_preset(path)(batch)
    close(backbone_outputs["sequence_output"], "bert_backbone/sequence_output")
    close(backbone_outputs["pooled_output"], "bert_backbone/pooled_output")


@pytest.mark.parametrize("loader", ["preset", "keras_file"])
def test_bert_classifier(loader):
    if loader == "preset":
        classifier = kzoo.BertClassifier.from_preset(os.path.join(HERE, "bert_classifier"))
    else:
        classifier = keras.saving.load_model(os.path.join(HERE, "bert_classifier.keras"))
    assert isinstance(classifier, kzoo.BertClassifier) and classifier.class_names is None  # saved without names
    close(classifier.predict(TEXTS, verbose=0), "bert_classifier/texts")
    close(classifier.predict(PAIRS, verbose=0), "bert_classifier/pairs")


def test_bert_classifier_saved_without_class_names_gets_them_from_preset():
    path = os.path.join(HERE, "bert_classifier")
    classifier = kzoo.BertClassifier.from_preset(path, class_names=["a", "b", "c"])
    assert classifier.class_names == ["a", "b", "c"] and classifier.get_config()["class_names"] == ["a", "b", "c"]
    close(classifier.predict(TEXTS, verbose=0), "bert_classifier/texts")
    with pytest.raises(ValueError, match=r"Unknown override\(s\) \['colours'\]"):
        kzoo.BertClassifier.from_preset(path, colours=["a", "b", "c"])


def test_bert_token_classifier_preset():
    model = kzoo.BertTokenClassifier.from_preset(os.path.join(HERE, "bert_token_classifier"))
    assert model.tags == ["O", "B-X", "I-X"]
    words = [["the", "cat"], ["a", "dog", "ran"]]
    tokens = np.asarray(model.preprocessor.call(words)["padding_mask"], bool)  # padding holds no answer
    actual = keras.ops.convert_to_numpy(model.predict(words, verbose=0))
    np.testing.assert_allclose(actual[tokens], EXPECTED["bert_token_classifier/words"][tokens], atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize("loader", ["preset", "keras_file"])
def test_transformer(loader):
    if loader == "preset":
        model = kzoo.Transformer.from_preset(os.path.join(HERE, "transformer"))
    else:
        model = keras.saving.load_model(os.path.join(HERE, "transformer.keras"))
    source = np.array([[5, 6, 7, 3, 0], [8, 9, 3, 0, 0]], "int32")
    target = np.array([[2, 5, 6, 7], [2, 8, 9, 0]], "int32")
    close(model({"encoder_token_ids": source, "decoder_token_ids": target}), "transformer/logits")
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(model.generate(source, beam_size=2, max_length=6)),
                                  EXPECTED["transformer/generate"])
