"""The SavedModel export: each kzoo model that
takes text exports to a SavedModel whose `serving_default` takes strings,
and a process without kzoo and Keras serves it with the Keras model's
predictions, to 1e-5, on models trained under the backend of this run (the
export from JAX and PyTorch goes through TensorFlow in a new process).

One fresh process serves every SavedModel of the module, and those of
test_embedder_export.py (`saved_models`, tests/export/saved_models.py), with
kzoo, Keras and tensorflow-text's Python package blocked and only
tensorflow-text's op libraries loaded; tests/examples/test_serve.py's server
does what a user does (`import tensorflow_text`, never kzoo) and serves the
classifier's probabilities exactly as that process does.

Under JAX and PyTorch one model is exported (`THROUGH_TENSORFLOW`): the
export of every model goes the same way there (saved as a preset, exported
by a TensorFlow process, the code tested under TensorFlow here), ~9 s of
CPU each. The fine-tuned classifier under JAX; the Transformer, whose
preprocessor the model does not hold and travels beside it, under PyTorch,
where `kzoo.translate` is cheap (JAX compiles the beam search) and the
README's test exports a classifier through TensorFlow too. All six passed
under JAX too when the suite exported more there.
"""

import os
import shutil

import keras
import numpy as np
import pytest

import kzoo
from kzoo.models.bert.bert_squad_metrics import decode_answers
from tests.export.serving_fixtures import softmax
from tests.models.bert.task_fixtures import SPECIAL, TOPICS, VOCABULARY, tiny_backbone, topic_sentences

ATOL = 1e-5
TEXTS = ["the song and the band", "a goal for the team", "soup with bread", "guitars", "", "zzz unknown words"]
PAIRS = (["the song", "a goal", "soup", "team"], ["the band", "the bread", "cheese soup", "a match"])
SENTENCES = ["the band with some song", "goal", "a really very good film with the team and the cast", "the  team "]
QUESTIONS = ["who sat", "where", "who ran to the mat", "what"]
CONTEXTS = [
    "The cat sat on the mat",
    "Café on the mat where the cat sat and the dog ran",
    "the dog ran to the mat and sat and the cat ran to the dog on the mat",
    "",
]
TRANSLATOR_VOCABULARY = ["[PAD]", "[UNK]", "[BOS]", "[EOS]", "a", "b", "c", "##d"]
SOURCES = ["a b", "c cd a", "", "b b b"]
BEAM_SIZE = 3
NAMES = ("classifier", "pairs", "features", "tags", "answers", "translations")
THROUGH_TENSORFLOW = {"jax": ("classifier",), "torch": ("translations",)}  # exported there


def exported_here(name):
    return keras.backend.backend() == "tensorflow" or name in THROUGH_TENSORFLOW[keras.backend.backend()]


def needs(name):
    return pytest.mark.skipif(not exported_here(name), reason=f"the {name} export: not on {keras.backend.backend()}")


def fine_tuned_classifier():
    """A classifier with class names, fine-tuned for a few steps on this backend."""
    names = list(TOPICS)
    model = kzoo.BertClassifier(tiny_backbone(), class_names=names,
                                preprocessor=kzoo.BertPreprocessor(kzoo.BertTokenizer(VOCABULARY), 16))
    texts, labels = topic_sentences(64, seed=0)
    model.compile(optimizer=keras.optimizers.Adam(1e-3))  # a few steps that change its predictions
    model.fit(texts, [names[label] for label in labels], batch_size=16, epochs=15, verbose=0)
    return model


def pair_classifier():
    return kzoo.BertClassifier(tiny_backbone(), class_names=["different", "same"],
                               preprocessor=kzoo.BertPreprocessor(kzoo.BertTokenizer(VOCABULARY), 16))


def question_answerer():
    vocabulary = SPECIAL + ["the", "cat", "dog", "sat", "ran", "on", "to", "mat", "and", "who", "cafe", "where"]
    backbone = tiny_backbone(vocabulary_size=len(vocabulary), max_sequence_length=16)
    return kzoo.BertQuestionAnswerer(backbone, preprocessor=kzoo.BertTokenizer(vocabulary))  # windows of 16


def translator():
    """A Transformer whose weights are drawn by NumPy: the same on every
    backend, and (seed 5) writing translations that end before the length limit, and longer ones."""
    tokenizer = kzoo.TransformerTokenizer(TRANSLATOR_VOCABULARY)
    model = kzoo.Transformer(vocabulary_size=len(TRANSLATOR_VOCABULARY), num_layers=1, num_heads=2, hidden_dim=16,
                             intermediate_dim=32, max_sequence_length=64)
    rng = np.random.default_rng(5)
    model.set_weights([rng.normal(0.0, 1.0, w.shape).astype("float32") for w in model.get_weights()])
    return model, kzoo.TransformerPreprocessor(tokenizer, source_length=8, target_length=8)


def translation_export():
    model, preprocessor = translator()
    return model, {"preprocessor": preprocessor, "beam_size": BEAM_SIZE}, {"text": SOURCES}


def models_to_export():
    """{name: (model, export options, serving inputs)}: the models this file exports on this backend
    (exported and served with test_embedder_export.py's by `saved_models`, tests/export/saved_models.py)."""
    builders = {
        "classifier": lambda: (fine_tuned_classifier(), {}, {"text": TEXTS}),
        "pairs": lambda: (pair_classifier(), {"text_pairs": True}, {"text_a": PAIRS[0], "text_b": PAIRS[1]}),
        "features": lambda: (
            kzoo.BertFeatureExtractor(tiny_backbone(), strategy="sum_all", preprocessor=kzoo.BertTokenizer(VOCABULARY)),
            {"text_pairs": True}, {"text_a": PAIRS[0], "text_b": PAIRS[1]},
        ),
        "tags": lambda: (
            kzoo.BertTokenClassifier(tiny_backbone(), tags=["O", "B-X", "I-X"], preprocessor=(
                kzoo.BertTokenClassifierPreprocessor(kzoo.BertTokenizer(VOCABULARY), sequence_length=8))),
            {}, {"text": SENTENCES},
        ),
        "answers": lambda: (question_answerer(), {}, {"question": QUESTIONS, "context": CONTEXTS}),
        "translations": translation_export,
    }
    return {name: build() for name, build in builders.items() if exported_here(name)}  # built in this order


@pytest.fixture(scope="module")
def exported(saved_models):
    """{name: (model, path, inputs)} for this file's models, and {name: their served outputs}."""
    models, served = saved_models
    names = [name for name in models if name in NAMES]
    return {name: models[name] for name in names}, {name: served[name] for name in names}


def test_writes_a_saved_model_with_assets_and_variables(exported):
    _, path, _ = next(iter(exported[0].values()))  # each export writes the same files
    assert sorted(os.listdir(path)) == ["assets", "fingerprint.pb", "saved_model.pb", "variables"]
    assert not [name for name in os.listdir(os.path.dirname(path)) if name.startswith(".")]  # no scratch left


@needs("classifier")
def test_classifier_serves_class_names_as_predict_labels(exported):
    model, _, inputs = exported[0]["classifier"]
    served = exported[1]["classifier"]
    logits = keras.ops.convert_to_numpy(model.predict(inputs["text"], verbose=0))
    np.testing.assert_allclose(served["logits"], logits, atol=ATOL, rtol=0)
    np.testing.assert_allclose(served["probabilities"], softmax(logits), atol=ATOL, rtol=0)
    assert served["class_ids"].tolist() == logits.argmax(-1).tolist()
    assert served["class_names"] == model.predict_labels(inputs["text"], verbose=0)
    assert len(set(served["class_names"])) > 1  # fine-tuned: not one class for every text


@needs("pairs")
def test_pair_classifier_serves_two_batches_of_text(exported):
    model, _, inputs = exported[0]["pairs"]
    served = exported[1]["pairs"]
    x = (inputs["text_a"], inputs["text_b"])
    np.testing.assert_allclose(served["logits"], keras.ops.convert_to_numpy(model.predict(x, verbose=0)),
                               atol=ATOL, rtol=0)
    assert served["class_names"] == model.predict_labels(x, verbose=0)


@needs("features")
def test_feature_extractor_serves_features_and_their_padding_mask(exported):
    model, _, inputs = exported[0]["features"]
    served = exported[1]["features"]
    x = (inputs["text_a"], inputs["text_b"])
    # Served at sequence_length, as predict gives the features; equal at the tokens (padding
    # positions hold what each path's batch length left there).
    mask = model.preprocessor.call(x)["padding_mask"].numpy()
    assert served["padding_mask"].tolist() == mask.tolist()
    expected = keras.ops.convert_to_numpy(model.predict(x, verbose=0))
    np.testing.assert_allclose(served["features"][mask == 1], expected[mask == 1], atol=ATOL, rtol=0)


@needs("tags")
def test_token_classifier_serves_a_tag_per_word(exported):
    model, _, inputs = exported[0]["tags"]
    served = exported[1]["tags"]
    words = [sentence.split() for sentence in inputs["text"]]
    width = max(map(len, words))
    expected = model.predict_words(inputs["text"], verbose=0)
    assert served["words"] == [w + [""] * (width - len(w)) for w in words]
    assert served["tags"] == [t + [""] * (width - len(t)) for t in expected]
    assert "O" in served["tags"][2][-4:]  # words after the 8 tokens: cut off, tagged "O" as predict_words
    assert (served["tag_ids"] == -1).sum() > width - len(words[0])
    np.testing.assert_allclose(served["logits"], model.predict(inputs["text"], verbose=0), atol=ATOL, rtol=0)


@needs("answers")
def test_question_answerer_serves_answer_spans(exported):
    model, _, inputs = exported[0]["answers"]
    served = exported[1]["answers"]
    questions, contexts = inputs["question"], inputs["context"]
    windows = model.preprocessor.windows((questions, contexts))
    assert len(windows["example_index"]) > len(questions)  # long contexts: several windows
    features = {key: windows[key].numpy() for key in ("token_ids", "segment_ids", "padding_mask")}
    logits = model.predict(features, verbose=0)
    answers, scores, null_scores = decode_answers(
        logits["start_logits"], logits["end_logits"], windows, contexts, return_scores=True
    )
    assert served["answer"] == answers == model.answer(questions, contexts)
    assert answers[1] and answers[3] == ""  # one answer with an accent; no context, no answer
    np.testing.assert_allclose(served["score"][:3], scores[:3], atol=ATOL, rtol=0)
    np.testing.assert_allclose(served["null_score"], null_scores, atol=ATOL, rtol=0)
    for answer, context, start, end in zip(answers, contexts, served["answer_start"], served["answer_end"]):
        assert context[start:end] == answer if answer else start == end == -1


@needs("translations")
def test_transformer_serves_translations_by_beam_search(exported):
    model, _, inputs = exported[0]["translations"]
    served = exported[1]["translations"]
    _, preprocessor = translator()
    expected = kzoo.translate(model, preprocessor, inputs["text"], beam_size=BEAM_SIZE)
    assert served["translation"] == expected
    assert sum(bool(text) for text in expected) >= 2


@needs("tags")
def test_export_replaces_an_earlier_saved_model(exported, tmp_path):
    path = tmp_path / "model"
    shutil.copytree(exported[0]["tags"][1], path)  # the token classifier's SavedModel, as the fixture wrote it
    exported[0]["classifier"][0].export(path)
    import tensorflow as tf  # noqa: PLC0415

    signature = tf.saved_model.load(str(path)).signatures["serving_default"]
    assert set(signature.structured_outputs) == {"logits", "probabilities", "class_ids", "class_names"}
    assert sorted(os.listdir(tmp_path)) == ["model"]
