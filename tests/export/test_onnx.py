"""ONNX export: the network checked with onnxruntime against
the Keras model to 1e-4, on every backend, and its inputs rebuilt from the
vocabulary and settings written beside it by a WordPiece written here from
BERT's description (sec. 3), not kzoo's."""

import json
import os
import unicodedata

import keras
import numpy as np
import pytest

import kzoo
from kzoo.export import onnx as onnx_export
from tests.models.bert.task_fixtures import VOCABULARY, tiny_backbone

onnxruntime = pytest.importorskip("onnxruntime")

TOLERANCE = 1e-4
TEXTS = [
    "The band played a good song",
    "Songs, goals and bread: the team's soup!",
    "CHEESE with some BREAD",
    "the film was really quite very good and the music was good and the story was bad",
    "zzz",
]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A tiny classifier (hidden 32, 2 layers) with class names, exported once per backend."""
    keras.utils.set_random_seed(0)
    preprocessor = kzoo.BertPreprocessor(kzoo.BertTokenizer(VOCABULARY), sequence_length=12)
    model = kzoo.BertClassifier(tiny_backbone(), class_names=["music", "sport", "food"], preprocessor=preprocessor)
    path = str(tmp_path_factory.mktemp("onnx") / "classifier")
    config = model.export(path, format="onnx")
    return model, path, config


def session(path):
    return onnxruntime.InferenceSession(os.path.join(path, "model.onnx"), providers=["CPUExecutionProvider"])


def test_files_and_config(exported):
    model, path, config = exported
    assert sorted(os.listdir(path)) == ["model.onnx", "onnx_config.json", "vocabulary.txt"]
    with open(os.path.join(path, "onnx_config.json"), encoding="utf-8") as f:
        assert json.load(f) == config
    with open(os.path.join(path, "vocabulary.txt"), encoding="utf-8") as f:
        assert f.read().split("\n")[:-1] == VOCABULARY
    assert [i["name"] for i in config["inputs"]] == ["token_ids", "segment_ids", "padding_mask"]
    assert [o["name"] for o in config["outputs"]] == ["logits"]
    assert config["labels"] == {"class_names": ["music", "sport", "food"]}
    assert config["packing"]["sequence_length"] == 12
    assert (config["packing"]["cls_token_id"], config["packing"]["sep_token_id"]) == (2, 3)
    assert config["tokenizer"]["lowercase"] is True
    assert config["largest_difference_from_keras"] <= TOLERANCE
    graph = session(path)
    assert [(i.name, i.shape, i.type) for i in graph.get_inputs()] == [
        (name, ["batch", "sequence_length"], "tensor(int32)") for name in ("token_ids", "segment_ids", "padding_mask")
    ]
    assert [(o.name, o.shape) for o in graph.get_outputs()] == [("logits", ["batch", 3])]


CASES = [(1, 12), (5, 12), (2, 3), (4, 32)]  # (batch, length): the graph's dimensions are free


def packed_inputs(batch, length):
    rng = np.random.default_rng(batch * 100 + length)
    return {
        "token_ids": rng.integers(0, len(VOCABULARY), (batch, length)).astype("int32"),
        "segment_ids": rng.integers(0, 2, (batch, length)).astype("int32"),
        "padding_mask": (np.arange(length) < rng.integers(1, length + 1, (batch, 1))).astype("int32"),
    }


@pytest.fixture(scope="module")
def keras_logits(exported):
    """The Keras model's logits for every case, from one call: each case padded to the longest
    length, which changes no logit (tests/models/test_batching.py). An eager call at a new shape
    costs ~1.5 s of CPU on JAX, where the cases' four shapes took 6 s."""
    model = exported[0]
    cases = [packed_inputs(batch, length) for batch, length in CASES]
    width = max(length for _, length in CASES)
    padded = {name: np.concatenate([np.pad(case[name], ((0, 0), (0, width - case[name].shape[1]))) for case in cases])
              for name in cases[0]}
    logits = keras.ops.convert_to_numpy(model(padded, training=False))
    return dict(zip(CASES, np.split(logits, np.cumsum([batch for batch, _ in CASES])[:-1])))


@pytest.mark.parametrize("batch, length", CASES)
def test_onnxruntime_matches_keras_for_any_batch_and_length(exported, keras_logits, batch, length):
    _, path, _ = exported
    actual = session(path).run(["logits"], packed_inputs(batch, length))[0]
    assert actual.shape == (batch, 3)
    np.testing.assert_allclose(actual, keras_logits[(batch, length)], atol=TOLERANCE, rtol=0)


# === A caller's own WordPiece, from the files only ===


def _is_punctuation(char):
    # BERT's basic tokenizer: ASCII symbols and Unicode punctuation split words.
    code = ord(char)
    return 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126 or (
        unicodedata.category(char).startswith("P")
    )


def reference_pieces(text, vocabulary, settings):
    """BERT sec. 3's tokenization: lower-case and strip accents, split on white
    space and punctuation, then greedy longest-match-first WordPiece."""
    if settings["lowercase"]:
        text = "".join(c for c in unicodedata.normalize("NFD", text.lower()) if unicodedata.category(c) != "Mn")
    words = []
    for chunk in text.split():
        word = ""
        for char in chunk:
            if _is_punctuation(char):
                words += [word, char]
                word = ""
            else:
                word += char
        words.append(word)
    ids, index = [], {token: i for i, token in enumerate(vocabulary)}
    for word in filter(None, words):
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start and (settings["suffix_indicator"] * (start > 0) + word[start:end]) not in index:
                end -= 1
            if end == start:
                pieces = [index[settings["unknown_token"]]]
                break
            pieces.append(index[settings["suffix_indicator"] * (start > 0) + word[start:end]])
            start = end
        ids += pieces
    return ids


def reference_inputs(texts, path):
    """The graph's inputs for `texts`, packed as onnx_config.json says."""
    with open(os.path.join(path, "onnx_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    with open(os.path.join(path, config["tokenizer"]["vocabulary_file"]), encoding="utf-8") as f:
        vocabulary = f.read().split("\n")[:-1]
    packing = config["packing"]
    length = packing["sequence_length"]
    rows = []
    for text in texts:
        pieces = reference_pieces(text, vocabulary, config["tokenizer"])[: length - 2]
        rows.append([packing["cls_token_id"], *pieces, packing["sep_token_id"]])
    token_ids = np.full((len(texts), length), packing["pad_token_id"], "int32")
    padding_mask = np.zeros((len(texts), length), "int32")
    for i, row in enumerate(rows):
        token_ids[i, : len(row)], padding_mask[i, : len(row)] = row, 1
    return {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids), "padding_mask": padding_mask}


def test_inputs_rebuilt_from_the_files_match_the_model_on_text(exported):
    model, path, _ = exported
    inputs = reference_inputs(TEXTS, path)
    packed = model.preprocessor(TEXTS)
    for name, value in inputs.items():
        np.testing.assert_array_equal(value, packed[name].numpy(), err_msg=name)
    logits = session(path).run(["logits"], inputs)[0]
    np.testing.assert_allclose(logits, model.predict(TEXTS, verbose=0), atol=TOLERANCE, rtol=0)
    assert [model.class_names[i] for i in logits.argmax(-1)] == model.predict_labels(TEXTS, verbose=0)


def test_backbone_outputs_by_name(tmp_path):
    backbone = tiny_backbone()
    config = onnx_export.export_onnx(backbone, tmp_path / "backbone")
    assert sorted(os.listdir(tmp_path / "backbone")) == ["model.onnx", "onnx_config.json"]  # no tokenizer
    assert [o["name"] for o in config["outputs"]] == ["sequence_output", "pooled_output"]
    packed = {
        "token_ids": np.array([[2, 7, 9, 3, 0], [2, 5, 6, 8, 3]], "int32"),
        "segment_ids": np.array([[0, 0, 0, 0, 0], [0, 0, 1, 1, 1]], "int32"),
        "padding_mask": np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], "int32"),
    }
    expected = backbone(packed)
    actual = session(str(tmp_path / "backbone")).run(["sequence_output", "pooled_output"], packed)
    for name, value in zip(["sequence_output", "pooled_output"], actual):
        np.testing.assert_allclose(value, keras.ops.convert_to_numpy(expected[name]), atol=TOLERANCE, rtol=0)


def test_bad_requests_are_refused_before_any_work(tmp_path):
    backbone = tiny_backbone()
    with pytest.raises(ValueError, match="Unknown export format 'tflite'; kzoo exports to"):
        kzoo.BertClassifier(backbone, num_classes=2).export(tmp_path / "x", format="tflite")
    plain = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    with pytest.raises(ValueError, match="takes a kzoo task or backbone"):
        onnx_export.export_onnx(plain, tmp_path / "x")
    half = kzoo.BertBackbone(vocabulary_size=9, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                             dtype="mixed_bfloat16")
    with pytest.raises(ValueError, match="computes in mixed_bfloat16; export a float32 model"):
        onnx_export.export_onnx(half, tmp_path / "x")
    assert not os.path.exists(tmp_path / "x")


def test_embedder_serves_embeddings_equal_to_encode(tmp_path):
    keras.utils.set_random_seed(0)
    preprocessor = kzoo.BertPreprocessor(kzoo.BertTokenizer(VOCABULARY), sequence_length=12)
    embedder = kzoo.BertTextEmbedder(tiny_backbone(), preprocessor=preprocessor)
    config = embedder.export(tmp_path / "embedder", format="onnx")
    assert [o["name"] for o in config["outputs"]] == ["embeddings"]
    assert config["model_class"] == "BertTextEmbedder"
    graph = session(str(tmp_path / "embedder"))
    assert [(o.name, o.shape) for o in graph.get_outputs()] == [("embeddings", ["batch", 32])]
    inputs = reference_inputs(TEXTS, str(tmp_path / "embedder"))  # from the files beside the graph
    embeddings = graph.run(["embeddings"], inputs)[0]
    np.testing.assert_allclose(embeddings, embedder.encode(TEXTS, verbose=0), atol=1e-5, rtol=0)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                    reason="the quantization reads the checked float graph whichever backend traced it: "
                           "run where the export costs least")
def test_int8_export_holds_int8_weights_and_stays_near_the_float_graph(exported, tmp_path):
    import onnx

    model, float_path, _ = exported
    path = str(tmp_path / "int8")
    config = model.export(path, format="onnx", int8=True)
    graph = onnx.load(os.path.join(path, "model.onnx"))
    operations = [node.op_type for node in graph.graph.node]
    # Every kernel: the layer's attention projections (4) and feed-forward (2), the pooler's, the head's.
    assert operations.count("MatMulInteger") == 4 + 2 + 2 and "Gemm" not in operations
    assert config["quantization"]["weights"] == "int8, one scale per output channel"
    # int8 rounding moves the tiny model's logits (about 0.3 in size) by a few hundredths at most.
    assert 0 < config["quantization"]["largest_difference_from_keras"] < 0.05
    packed = packed_inputs(5, 12)
    logits_int8 = session(path).run(["logits"], packed)[0]
    logits_float = session(float_path).run(["logits"], packed)[0]
    assert np.abs(logits_int8 - logits_float).max() < 0.05
    assert (logits_int8.argmax(-1) == logits_float.argmax(-1)).mean() >= 0.8
