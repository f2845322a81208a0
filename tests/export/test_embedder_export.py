"""The SavedModel of a `kzoo.BertTextEmbedder`: strings in, `embeddings` out,
served by a process without kzoo, Keras or tensorflow-text's Python package,
equal to `encode` to 1e-5. The embedder pools by max and is not normalised:
settings that are not the defaults, so a setting lost on the way shows.
The served graph calls the model itself, so mean pooling and normalisation
(the defaults) add nothing here.

Exported under TensorFlow only: under JAX and PyTorch a SavedModel is
written by a TensorFlow process from a preset of the model, the way
test_saved_model.py's classifier and Transformer are exported there (each
such export costs a fresh process, ~9 s of CPU); what the embedder adds to
that way, its settings read back from the preset, is checked here on every
backend. The embedder is exported and served with test_saved_model.py's
models (`saved_models`, tests/export/saved_models.py). The ONNX export of the
embedder is in test_onnx.py, under that file's skip condition."""

import os

import keras
import numpy as np
import pytest

import kzoo
from tests.models.bert.task_fixtures import VOCABULARY, tiny_backbone

ATOL = 1e-5
TEXTS = [
    "the song and the band", "a goal for the team", "soup with bread", "guitars", "", "zzz unknown words",
    "a really very good film with the team and the cast and some music and a song",  # cut at 16 tokens
]


def max_pooling_embedder():
    return kzoo.BertTextEmbedder(tiny_backbone(), pooling="max", normalize=False,
                                 preprocessor=kzoo.BertPreprocessor(kzoo.BertTokenizer(VOCABULARY), 16))


def models_to_export():
    """{name: (model, export options, serving inputs)}: the embedder this file exports, under TensorFlow
    (exported and served with test_saved_model.py's by `saved_models`, tests/export/saved_models.py)."""
    return {"max": (max_pooling_embedder(), {}, {"text": TEXTS})} if ON_TENSORFLOW else {}


ON_TENSORFLOW = keras.backend.backend() == "tensorflow"
EXPORTED_HERE = pytest.mark.skipif(
    not ON_TENSORFLOW, reason="exported under TensorFlow only: JAX and PyTorch export through a TensorFlow "
                              "process as test_saved_model.py's models do; the preset that process reads "
                              "is checked by test_pooling_settings_travel_in_a_preset")


@pytest.fixture(scope="module")
def exported(saved_models):
    """(model, path) and the served outputs of this file's embedder."""
    models, served = saved_models
    return models["max"][:2], served["max"]


@EXPORTED_HERE
def test_served_embeddings_equal_encode(exported):
    (model, _), served = exported
    assert list(served) == ["embeddings"]
    expected = model.encode(TEXTS, verbose=0)
    assert served["embeddings"].shape == expected.shape == (len(TEXTS), 32)
    np.testing.assert_allclose(served["embeddings"], expected, atol=ATOL, rtol=0)
    # Max pooling, not normalised, as the model was built (normalised vectors would have unit length).
    assert np.abs(np.linalg.norm(served["embeddings"], axis=1) - 1.0).min() > 1e-2


@EXPORTED_HERE
def test_served_vectors_rank_as_search_does(exported):
    (model, _), served = exported
    vectors = served["embeddings"].astype("float32")
    _, served_order = kzoo.semantic_search(vectors[:2], vectors, top_k=len(TEXTS))
    _, expected_order = model.search(TEXTS[:2], TEXTS, top_k=len(TEXTS))
    assert served_order.tolist() == expected_order.tolist()


def test_pooling_settings_travel_in_a_preset(tmp_path):
    """What the TensorFlow process of an export from JAX or PyTorch rebuilds the embedder from."""
    model = max_pooling_embedder()
    model.save_to_preset(str(tmp_path / "preset"))
    restored = kzoo.BertTextEmbedder.from_preset(str(tmp_path / "preset"))
    assert (restored.pooling, restored.normalize) == ("max", False)
    assert restored.preprocessor.sequence_length == 16


@EXPORTED_HERE
def test_signature_takes_strings_and_returns_float32(exported):
    import tensorflow as tf  # noqa: PLC0415

    (_, path), _ = exported
    signature = tf.saved_model.load(path).signatures["serving_default"]
    assert list(signature.structured_input_signature[1]) == ["text"]
    assert signature.structured_input_signature[1]["text"].dtype == tf.string
    assert signature.structured_outputs["embeddings"].dtype == tf.float32
    assert signature.structured_outputs["embeddings"].shape.as_list() == [None, 32]


def test_embedder_export_takes_no_options(tmp_path):
    model = max_pooling_embedder()  # refused before any work: no export needed
    with pytest.raises(ValueError, match=r"BertTextEmbedder.export takes no option text_pairs; its options are \[\]"):
        model.export(tmp_path / "model", text_pairs=True)
    bare = kzoo.BertTextEmbedder(tiny_backbone())
    with pytest.raises(ValueError, match="has no preprocessor, and its SavedModel takes strings"):
        bare.export(tmp_path / "model")
    assert os.listdir(tmp_path) == []
