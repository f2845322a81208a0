"""The SavedModel of a `kzoo.BertTextEmbedder`: strings in, `embeddings` out,
served by a process without kzoo, Keras or tensorflow-text's Python package,
equal to `encode` to 1e-5, from embedders trained or built on the backend of
this run. Under JAX and PyTorch the export goes through a TensorFlow
process, which rebuilds the pooling from the saved preset: there the
max-pooling embedder, not normalised, is exported (its settings are not the
defaults, so a setting lost on the way shows), and the fine-tuned
mean-pooling one, whose graph is the same code, under TensorFlow only (as
test_saved_model.py's THROUGH_TENSORFLOW). The embedders are exported and
served with test_saved_model.py's models (`saved_models`,
tests/export/conftest.py). The ONNX export of the embedder is in
test_onnx.py, under that file's skip condition."""

import os

import keras
import numpy as np
import pytest

import kzoo
from tests.models.bert.task_fixtures import VOCABULARY, tiny_backbone, topic_sentences

ATOL = 1e-5
TEXTS = [
    "the song and the band", "a goal for the team", "soup with bread", "guitars", "", "zzz unknown words",
    "a really very good film with the team and the cast and some music and a song",  # cut at 16 tokens
]


def fine_tuned_embedder():
    """Mean pooling, unit length; a few contrastive steps on this backend."""
    model = kzoo.BertTextEmbedder(tiny_backbone(),
                                  preprocessor=kzoo.BertPreprocessor(kzoo.BertTokenizer(VOCABULARY), 16))
    anchors, _ = topic_sentences(32, seed=0)
    positives, _ = topic_sentences(32, seed=1)
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    model.fit((anchors, positives), batch_size=8, epochs=2, verbose=0)
    return model


def max_pooling_embedder():
    return kzoo.BertTextEmbedder(tiny_backbone(), pooling="max", normalize=False,
                                 preprocessor=kzoo.BertPreprocessor(kzoo.BertTokenizer(VOCABULARY), 16))


def models_to_export():
    """{name: (model, export options, serving inputs)}: the embedders this file exports on this backend
    (exported and served with test_saved_model.py's by `saved_models`, tests/export/conftest.py)."""
    if keras.backend.backend() != "tensorflow":
        return {"max": (max_pooling_embedder(), {}, {"text": TEXTS})}
    return {"mean": (fine_tuned_embedder(), {}, {"text": TEXTS}), "max": (max_pooling_embedder(), {}, {"text": TEXTS})}


@pytest.fixture(scope="module")
def exported(saved_models):
    """{name: (model, path)} and the served outputs of this file's embedders."""
    models, served = saved_models
    names = [name for name in ("mean", "max") if name in models]
    return {name: models[name][:2] for name in names}, {name: served[name] for name in names}


ON_TENSORFLOW = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="the fine-tuned mean-pooling embedder is exported under TensorFlow only; under JAX and PyTorch "
           "the max-pooling one goes through TensorFlow, its pooling and normalisation rebuilt from the preset")


@pytest.mark.parametrize("name", [pytest.param("mean", marks=ON_TENSORFLOW), "max"])
def test_served_embeddings_equal_encode(exported, name):
    model, _ = exported[0][name]
    served = exported[1][name]
    assert list(served) == ["embeddings"]
    expected = model.encode(TEXTS, verbose=0)
    assert served["embeddings"].shape == expected.shape == (len(TEXTS), 32)
    np.testing.assert_allclose(served["embeddings"], expected, atol=ATOL, rtol=0)


@ON_TENSORFLOW
def test_pooling_and_normalisation_travel_with_the_export(exported):
    norms = {name: np.linalg.norm(served["embeddings"], axis=1) for name, served in exported[1].items()}
    np.testing.assert_allclose(norms["mean"], 1.0, atol=1e-5)
    assert np.abs(norms["max"] - 1.0).min() > 1e-2  # max pooling, not normalised, as the model was built


@ON_TENSORFLOW
def test_served_vectors_rank_as_search_does(exported):
    model, _ = exported[0]["mean"]
    vectors = exported[1]["mean"]["embeddings"].astype("float32")
    _, served_order = kzoo.semantic_search(vectors[:2], vectors, top_k=len(TEXTS))
    _, expected_order = model.search(TEXTS[:2], TEXTS, top_k=len(TEXTS))
    assert served_order.tolist() == expected_order.tolist()


def test_signature_takes_strings_and_returns_float32(exported):
    import tensorflow as tf  # noqa: PLC0415

    _, path = exported[0]["max"]  # exported on every backend
    signature = tf.saved_model.load(path).signatures["serving_default"]
    assert list(signature.structured_input_signature[1]) == ["text"]
    assert signature.structured_input_signature[1]["text"].dtype == tf.string
    assert signature.structured_outputs["embeddings"].dtype == tf.float32
    assert signature.structured_outputs["embeddings"].shape.as_list() == [None, 32]


def test_embedder_export_takes_no_options(exported, tmp_path):
    model, _ = exported[0]["max"]
    with pytest.raises(ValueError, match=r"BertTextEmbedder.export takes no option text_pairs; its options are \[\]"):
        model.export(tmp_path / "model", text_pairs=True)
    bare = kzoo.BertTextEmbedder(tiny_backbone())
    with pytest.raises(ValueError, match="has no preprocessor, and its SavedModel takes strings"):
        bare.export(tmp_path / "model")
    assert os.listdir(tmp_path) == []
