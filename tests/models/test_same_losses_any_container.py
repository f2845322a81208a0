"""The same examples as a list, a NumPy array or a batched tf.data dataset, with
shuffle=False, train to the same epoch losses (issue 45): one way in for every
kind of data, each batch padded alike."""

import keras
import numpy as np
import tensorflow as tf

import kzoo
from tests.models.bert.task_fixtures import VOCABULARY, tiny_backbone, topic_sentences


def _epoch_losses(x, y):
    keras.utils.set_random_seed(0)  # the same initial weights and dropout draws for every container
    preprocessor = kzoo.BertPreprocessor(kzoo.BertTokenizer(VOCABULARY), 16)
    model = kzoo.BertClassifier(tiny_backbone(), num_classes=3, preprocessor=preprocessor)
    return model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history["loss"]


def test_list_array_and_dataset_give_the_same_epoch_losses():
    texts, labels = topic_sentences(40, seed=0)
    as_list = _epoch_losses(list(texts), list(labels))
    as_array = _epoch_losses(np.asarray(texts), np.asarray(labels))
    as_dataset = _epoch_losses(tf.data.Dataset.from_tensor_slices((list(texts), np.asarray(labels))).batch(8), None)
    np.testing.assert_allclose(as_array, as_list, rtol=0, atol=1e-5)
    np.testing.assert_allclose(as_dataset, as_list, rtol=0, atol=1e-5)
