"""Tasks whose head reads the token states (token classification, sec. 4.3's
span prediction) leave BERT's pooler out of training on every backend: its
weights do not move (no weight decay from JAX's zero gradients), Keras warns of
no missing gradient (TensorFlow, torch), and the backbone's own flags stay.

Every test runs on the backend of the session (KERAS_BACKEND).
"""

import warnings

import keras
import numpy as np
import pytest
from keras import ops

from kzoo import BertTokenClassifier
from kzoo.models.bert.bert_question_answerer import BertQuestionAnswerer
from tests.models.bert.task_fixtures import tiny_backbone

BATCH, LENGTH = 4, 12


def packed(rng):
    return {
        "token_ids": rng.integers(5, 20, size=(BATCH, LENGTH)).astype("int32"),
        "segment_ids": np.zeros((BATCH, LENGTH), "int32"),
        "padding_mask": np.ones((BATCH, LENGTH), "int32"),
    }


def token_classifier(rng):
    model = BertTokenClassifier(tiny_backbone(), num_classes=3)
    return model, packed(rng), rng.integers(0, 3, size=(BATCH, LENGTH)).astype("int32")


def question_answerer(rng):
    positions = rng.integers(1, LENGTH, size=(BATCH,)).astype("int32")
    return BertQuestionAnswerer(tiny_backbone()), packed(rng), {"start_positions": positions, "end_positions": positions}


@pytest.mark.parametrize("build", [token_classifier, question_answerer], ids=lambda f: f.__name__)
def test_the_pooler_is_not_trained_and_nothing_warns(build):
    keras.utils.set_random_seed(0)
    model, x, y = build(np.random.default_rng(0))
    pooler = model.backbone.pooled_dense.weights
    before = [ops.convert_to_numpy(v) for v in pooler]
    embedding = ops.convert_to_numpy(model.backbone.token_embedding.embeddings)
    assert len(model.trainable_weights) == len(model.weights) - 2
    assert {id(v) for v in pooler} <= {id(v) for v in model.non_trainable_weights}
    model.compile(optimizer=keras.optimizers.AdamW(0.05, weight_decay=0.5))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # "Gradients do not exist for variables ..."
        model.fit(x, y, epochs=2, batch_size=2, verbose=0)
    assert all(np.array_equal(b, ops.convert_to_numpy(v)) for b, v in zip(before, pooler))
    moved = np.abs(ops.convert_to_numpy(model.backbone.token_embedding.embeddings) - embedding).max()
    assert moved > 1e-3, moved
    assert len(model.backbone.trainable_weights) == len(model.backbone.weights)
