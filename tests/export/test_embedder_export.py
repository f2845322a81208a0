"""The SavedModel of a `kzoo.BertTextEmbedder`: strings in, `embeddings` out,
served by a process without kzoo, Keras or tensorflow-text's Python package,
equal to `encode` to 1e-5, from embedders trained or built on the backend of
this run (under JAX and PyTorch the export goes through a TensorFlow
process, which rebuilds the pooling from the saved preset). The ONNX export
of the embedder is in test_onnx.py, under that file's skip condition."""

import os

import keras
import numpy as np
import pytest

import kzoo
from tests.export.serving_fixtures import serve_without_kzoo
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


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """{name: (model, path)} and the served outputs of each SavedModel, from one serving process."""
    root = tmp_path_factory.mktemp("embedders")
    keras.utils.set_random_seed(0)
    models = {
        "mean": fine_tuned_embedder(),
        "max": kzoo.BertTextEmbedder(tiny_backbone(), pooling="max", normalize=False,
                                     preprocessor=kzoo.BertPreprocessor(kzoo.BertTokenizer(VOCABULARY), 16)),
    }
    paths = {name: os.path.join(root, name) for name in models}
    for name, model in models.items():
        model.export(paths[name])
    served = serve_without_kzoo([{"path": paths[name], "inputs": {"text": TEXTS}} for name in models], mode="ops")
    return {name: (model, paths[name]) for name, model in models.items()}, dict(zip(models, served))


@pytest.mark.parametrize("name", ["mean", "max"])
def test_served_embeddings_equal_encode(exported, name):
    model, _ = exported[0][name]
    served = exported[1][name]
    assert list(served) == ["embeddings"]
    expected = model.encode(TEXTS, verbose=0)
    assert served["embeddings"].shape == expected.shape == (len(TEXTS), 32)
    np.testing.assert_allclose(served["embeddings"], expected, atol=ATOL, rtol=0)


def test_pooling_and_normalisation_travel_with_the_export(exported):
    norms = {name: np.linalg.norm(served["embeddings"], axis=1) for name, served in exported[1].items()}
    np.testing.assert_allclose(norms["mean"], 1.0, atol=1e-5)
    assert np.abs(norms["max"] - 1.0).min() > 1e-2  # max pooling, not normalised, as the model was built


def test_served_vectors_rank_as_search_does(exported):
    model, _ = exported[0]["mean"]
    vectors = exported[1]["mean"]["embeddings"].astype("float32")
    _, served_order = kzoo.semantic_search(vectors[:2], vectors, top_k=len(TEXTS))
    _, expected_order = model.search(TEXTS[:2], TEXTS, top_k=len(TEXTS))
    assert served_order.tolist() == expected_order.tolist()


def test_signature_takes_strings_and_returns_float32(exported):
    import tensorflow as tf  # noqa: PLC0415

    _, path = exported[0]["mean"]
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
