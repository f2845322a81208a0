"""Validation during `fit` on raw text (Task/BaseModel, every task): the
held-out part is Keras' (the last examples, before shuffling), labels may be
names, and bad values are refused before any work. EarlyStopping and
kzoo.BestPreset: tests/callbacks/test_best_preset.py."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import kzoo
from tests.models.bert import test_bert_token_classifier as tagged  # its tagged sentences
from tests.models.bert.task_fixtures import TOPICS, VOCABULARY, tiny_backbone, topic_sentences

NAMES = list(TOPICS)


def tiny_classifier():
    keras.utils.set_random_seed(0)
    preprocessor = kzoo.BertPreprocessor(kzoo.BertTokenizer(VOCABULARY), sequence_length=16)
    model = kzoo.BertClassifier(tiny_backbone(num_layers=1, hidden_dim=8), class_names=NAMES,
                                preprocessor=preprocessor, dropout=0.0)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    return model


@pytest.mark.once  # the data path (labels, splits, input forms) runs the same TensorFlow and NumPy code on every backend; each backend's own steps: test_task and the container-loss test
def test_validation_split_is_the_last_examples_and_takes_class_names():
    model = tiny_classifier()
    texts, ids = topic_sentences(32, seed=0)
    names = [NAMES[i] for i in ids]
    history = model.fit(texts, names, validation_split=0.25, batch_size=8, epochs=1, verbose=0).history
    held_out = model.evaluate(texts[-8:], ids[-8:], batch_size=8, return_dict=True, verbose=0)  # as Keras: the last 8
    np.testing.assert_allclose([history["val_loss"][0], history["val_accuracy"][0]],
                               [held_out["loss"], held_out["accuracy"]], atol=1e-6)
    # validation_data in names, batched by length as training (validation_batch_size honoured).
    history = model.fit(texts[:24], ids[:24], validation_data=(texts[24:], names[24:]), validation_batch_size=3,
                        epochs=1, verbose=0).history
    held_out = model.evaluate(texts[24:], ids[24:], return_dict=True, verbose=0)
    np.testing.assert_allclose(history["val_loss"][0], held_out["loss"], atol=1e-6)


@pytest.mark.parametrize("fraction, message", [
    (1.0, r"must be a number in \[0, 1\).*got 1.0"),
    (-0.2, r"must be a number in \[0, 1\).*got -0.2"),
    ("0.2", r"must be a number in \[0, 1\).*got '0.2' \(str\)"),
    (0.99, "validation_split=0.99 of 8 examples leaves 0 for training"),
    (1e-20, "validation_split=1e-20 of 8 examples leaves 0 for validation"),
])
def test_bad_validation_split_fails_before_training(fraction, message):
    model = tiny_classifier()
    texts, ids = topic_sentences(8, seed=0)
    before = model.get_weights()
    with pytest.raises(ValueError, match=message):
        model.fit(texts, ids, validation_split=fraction, verbose=0)
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))


def test_validation_of_a_dataset_or_without_labels_is_refused():
    model = tiny_classifier()
    texts, ids = topic_sentences(8, seed=0)
    with pytest.raises(ValueError, match=r"validation_split cuts examples in memory.*dataset.take\(n\)"):
        model.fit(tf.data.Dataset.from_tensor_slices((texts, ids)).batch(4), validation_split=0.25, verbose=0)
    with pytest.raises(ValueError, match=r"validation_data has none \(got a list\).*as a tuple"):
        model.fit(texts, ids, validation_data=[texts, ids], verbose=0)



@pytest.mark.once  # the data path (labels, splits, input forms) runs the same TensorFlow and NumPy code on every backend; each backend's own steps: test_task and the container-loss test
def test_token_classifier_validation_split_takes_tag_names():
    """The same path for labels per word: the last sentences held out, their tags given as names."""
    keras.utils.set_random_seed(0)
    preprocessor = kzoo.BertTokenClassifierPreprocessor(kzoo.BertTokenizer(tagged.VOCABULARY), 16)
    backbone = kzoo.BertBackbone(vocabulary_size=len(tagged.VOCABULARY), num_layers=1, num_heads=2, hidden_dim=8,
                                 intermediate_dim=16, max_sequence_length=16)
    model = kzoo.BertTokenClassifier(backbone, tags=tagged.TAGS, preprocessor=preprocessor)
    words, tags = tagged.TRAIN_WORDS[:16], tagged.TRAIN_TAGS[:16]  # tags as names
    history = model.fit(words, tags, validation_split=0.25, batch_size=4, epochs=1, verbose=0).history
    held_out = model.evaluate(words[12:], tagged.label_ids(tags[12:]), return_dict=True, verbose=0)
    np.testing.assert_allclose(history["val_loss"][0], held_out["loss"], atol=1e-6)
