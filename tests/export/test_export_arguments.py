"""Bad export arguments get kzoo's own errors before any work, and a failed
export leaves what was at the path."""

import os

import keras
import pytest
import tensorflow as tf

import kzoo
from kzoo.export import saved_model
from tests.models.bert.task_fixtures import VOCABULARY, tiny_backbone


@pytest.fixture
def classifier():
    return kzoo.BertClassifier(tiny_backbone(), num_classes=2, preprocessor=kzoo.BertTokenizer(VOCABULARY))


@pytest.mark.parametrize(
    "options,message",
    [
        ({"format": "onnx_typo"}, "Unknown export format 'onnx_typo'; kzoo exports to ['onnx', 'tf_saved_model']"),
        ({"beam_size": 4}, "BertClassifier.export takes no option beam_size; its options are ['text_pairs']"),
        ({"text_pairs": "yes"}, "text_pairs must be True or False"),
        ({"preprocessor": kzoo.BertTokenizer(VOCABULARY)}, "takes no preprocessor argument"),
    ],
)
def test_bad_options(classifier, tmp_path, options, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        classifier.export(tmp_path / "model", **options)
    assert os.listdir(tmp_path) == []


def test_models_without_text_or_without_export(tmp_path):
    bare = kzoo.BertClassifier(tiny_backbone(), num_classes=2)
    with pytest.raises(ValueError, match="has no preprocessor, and its SavedModel takes strings"):
        bare.export(tmp_path / "model")
    choices = kzoo.BertMultipleChoice(tiny_backbone(), num_choices=4, preprocessor=kzoo.BertTokenizer(VOCABULARY))
    with pytest.raises(ValueError, match="a BertMultipleChoice has no such export"):
        choices.export(tmp_path / "model")
    transformer = kzoo.Transformer(vocabulary_size=8, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
    with pytest.raises(ValueError, match="Transformer.export needs the preprocessor the model was trained with"):
        transformer.export(tmp_path / "model")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "options,message",
    [
        ({"max_answer_length": 0}, "max_answer_length must be an int >= 1"),
        ({"null_score_threshold": "high"}, "null_score_threshold must be a number"),
    ],
)
def test_bad_answer_options(tmp_path, options, message):
    model = kzoo.BertQuestionAnswerer(tiny_backbone(), preprocessor=kzoo.BertTokenizer(VOCABULARY))
    with pytest.raises(ValueError, match=message):
        model.export(tmp_path / "model", **options)


@pytest.mark.parametrize(
    "options,message",
    [
        ({"beam_size": 0}, "beam_size must be an int >= 1"),
        ({"length_penalty": -1.0}, "length_penalty"),
        ({"max_length": 2.5}, "max_length must be an int >= 1"),
    ],
)
def test_bad_search_options(tmp_path, options, message):
    tokenizer = kzoo.TransformerTokenizer(["[PAD]", "[UNK]", "[BOS]", "[EOS]", "a"])
    model = kzoo.Transformer(vocabulary_size=5, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
    with pytest.raises(ValueError, match=message):
        model.export(tmp_path / "model", preprocessor=kzoo.TransformerPreprocessor(tokenizer, 8, 8), **options)


def test_paths_that_are_not_for_a_saved_model(classifier, tmp_path):
    (tmp_path / "file").write_text("mine")
    with pytest.raises(ValueError, match="is a file; the SavedModel is a directory"):
        classifier.export(tmp_path / "file")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("mine")
    with pytest.raises(ValueError, match="holds files that are not a SavedModel"):
        classifier.export(tmp_path / "notes")
    with pytest.raises(TypeError, match="path must be a str or os.PathLike"):
        classifier.export(3)
    assert sorted(os.listdir(tmp_path)) == ["file", "notes"]
    assert os.listdir(tmp_path / "notes") == ["todo.txt"]


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the in-process export: TensorFlow")
def test_export_traces_once_and_a_failed_one_leaves_the_earlier_saved_model(classifier, tmp_path, monkeypatch):
    traces, build = [], saved_model.build_serving

    def counted(*args):  # the serving function runs in Python once per trace of its graph
        serving = build(*args)
        return serving._replace(function=lambda *texts: traces.append(1) or serving.function(*texts))

    monkeypatch.setattr(saved_model, "build_serving", counted)
    path = tmp_path / "model"
    classifier.export(path)
    assert len(traces) == 1  # Keras' ExportArchive traced it twice: the export cost 1.7x
    before = sorted(os.listdir(path))

    def fail(obj, scratch, **kwargs):
        assert os.path.getsize(path / "saved_model.pb") > 0  # the earlier one stays there meanwhile
        open(os.path.join(scratch, "saved_model.pb"), "w").close()
        raise OSError("No space left on device")

    monkeypatch.setattr(tf.saved_model, "save", fail)
    with pytest.raises(OSError, match="No space left"):
        classifier.export(path)
    assert sorted(os.listdir(path)) == before and os.path.getsize(path / "saved_model.pb") > 0
    assert os.listdir(tmp_path) == ["model"]  # no scratch directory left


@pytest.mark.skipif(keras.backend.backend() == "tensorflow", reason="the export through TensorFlow: JAX, PyTorch")
def test_failed_export_through_tensorflow_says_what_happened(classifier, tmp_path, monkeypatch):
    # A worker module Python cannot find: the new process fails at once (a name inside kzoo
    # would import kzoo, and TensorFlow with it, before failing: 5-6 s of CPU for the same message).
    monkeypatch.setattr(saved_model, "WORKER", "kzoo_no_such_worker")
    with pytest.raises(RuntimeError, match=r"(?s)KERAS_BACKEND=tensorflow in a new process, which failed:.*no_such_worker"):
        classifier.export(tmp_path / "model")
    assert os.listdir(tmp_path) == []
