"""The same examples as a list, a NumPy array or a batched tf.data dataset, with
shuffle=False, train to the same epoch losses (issue 45): one way in for every
kind of data, each batch padded alike."""

import keras
import numpy as np
import tensorflow as tf

import kzoo
from tests.models.bert.task_fixtures import VOCABULARY, tiny_backbone, topic_sentences
from tests.test_case import FirstFitState


def test_list_array_and_dataset_give_the_same_epoch_losses():
    texts, labels = topic_sentences(40, seed=0)
    keras.utils.set_random_seed(0)
    preprocessor = kzoo.BertPreprocessor(kzoo.BertTokenizer(VOCABULARY), 16)
    model = kzoo.BertClassifier(tiny_backbone(), num_classes=3, preprocessor=preprocessor)
    # One model, each fit from the first one's initial weights, dropout seeds and optimizer state.
    first_state = FirstFitState()

    def epoch_losses(x, y):
        keras.utils.set_random_seed(0)
        return model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0,
                         callbacks=[first_state]).history["loss"]

    as_list = epoch_losses(list(texts), list(labels))
    as_array = epoch_losses(np.asarray(texts), np.asarray(labels))
    as_dataset = epoch_losses(tf.data.Dataset.from_tensor_slices((list(texts), np.asarray(labels))).batch(8), None)
    np.testing.assert_allclose(as_array, as_list, rtol=0, atol=1e-5)
    np.testing.assert_allclose(as_dataset, as_list, rtol=0, atol=1e-5)
