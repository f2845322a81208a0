"""`kaggle://` handles: a tiny KerasHub BERT preset saved
with `save_to_preset`, placed in a kagglehub cache this test writes in
kagglehub's own layout, and read through the real kagglehub code with every
connection refused: the same outputs as KerasHub, every BERT class resolves the
handle, a classifier fits raw text, and a handle that is not cached gives the
clear error before anything is built. Nothing here reaches the network."""

import shutil
import sys

import kagglehub
import keras
import keras_hub
import numpy as np
import pytest

import kzoo
from kzoo.presets import detect_format
from tests.presets.test_released import VOCABULARY, batch, no_network  # noqa: F401 (autouse fixture: sockets blocked)

# Resolving a handle reads files; the outputs' parity with KerasHub is tested on every backend by
# test_keras_hub.py. Each test under one backend when the runs are divided (tests/conftest.py).
pytestmark = pytest.mark.once

MODEL = "keras/bert/keras/bert_tiny_en_uncased"
HANDLE = f"kaggle://{MODEL}/2"
TOLERANCE = 1e-5
# What KerasHub's from_preset fetches of a BERT preset, file by file (written
# from keras_hub's preset_utils and Tokenizer.load_preset_assets, not from kzoo).
KERAS_HUB_FILES = ("config.json", "model.weights.h5", "tokenizer.json", "assets/tokenizer/vocabulary.txt")
TEXTS, LABELS = ["some text", "good text", "Some TEXT", "good"], np.array([0, 1, 0, 1])


@pytest.fixture(scope="module")
def preset(tmp_path_factory):
    """A KerasHub BertBackbone (every weight random, LayerNorm and biases
    included) and uncased BertTokenizer, saved as one preset directory."""
    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(VOCABULARY), num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32,
        max_sequence_length=32,
    )
    rng = np.random.RandomState(0)
    for variable in backbone.weights:
        variable.assign(rng.normal(size=variable.shape).astype("float32") * 0.2 + 0.05)
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=VOCABULARY, lowercase=True)
    directory = tmp_path_factory.mktemp("keras_hub") / "bert_tiny_en_uncased"
    backbone.save_to_preset(directory)
    tokenizer.save_to_preset(directory)
    return backbone, tokenizer, directory


@pytest.fixture
def kaggle_cache(tmp_path, monkeypatch):
    """An empty kagglehub cache. kagglehub reads KAGGLEHUB_CACHE at each call
    (`kagglehub.config.get_cache_folder`), so setting it after the import is
    enough; outside Kaggle and Colab notebooks kagglehub's HTTP resolver,
    which looks in that cache first, answers every handle."""
    cache = tmp_path / "kagglehub"
    cache.mkdir()
    monkeypatch.setenv("KAGGLEHUB_CACHE", str(cache))
    monkeypatch.delenv("KAGGLE_KERNEL_RUN_TYPE", raising=False)
    monkeypatch.delenv("TBE_RUNTIME_ADDR", raising=False)
    return cache


def fill_kaggle_cache(cache, model, version, directory, layout="bundle"):
    """`directory` as kagglehub caches a download of `model/version`: the
    files in models/<owner>/<model>/<framework>/<variation>/<version>/ and a
    marker of a complete download, either <version>.complete beside that
    folder (the whole version: `model_download(handle)`) or
    .complete/<version>/<file>.complete for each file fetched alone
    (`model_download(handle, path)`, as KerasHub's from_preset does)."""
    folder = cache / "models" / model
    target = folder / str(version)
    if layout == "bundle":
        shutil.copytree(directory, target)
        (folder / f"{version}.complete").touch()
        return target
    for name in KERAS_HUB_FILES:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(directory / name, target / name)
        marker = folder / ".complete" / str(version) / f"{name}.complete"
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    return target


def outputs(backbone):
    return {name: keras.ops.convert_to_numpy(value) for name, value in backbone(batch()).items()}


def max_difference(found, expected):
    real = batch()["padding_mask"].astype(bool)
    return max(
        float(np.abs(found["sequence_output"][real] - expected["sequence_output"][real]).max()),
        float(np.abs(found["pooled_output"] - expected["pooled_output"]).max()),
    )


# === A cached handle loads offline ===


@pytest.mark.parametrize("layout", ["bundle", "files"])
def test_backbone_from_the_cache_matches_keras_hub(preset, kaggle_cache, no_network, layout):
    reference, _, directory = preset
    target = fill_kaggle_cache(kaggle_cache, MODEL, 2, directory, layout)
    expected = outputs(reference)
    # The cache is complete by kagglehub's own rules (and KerasHub, which
    # fetches file by file, reads the "files" one offline too).
    if layout == "bundle":
        assert kagglehub.model_download(f"{MODEL}/2") == str(target)
    else:
        assert kagglehub.model_download(f"{MODEL}/2", "config.json") == str(target / "config.json")
        assert max_difference(outputs(keras_hub.models.BertBackbone.from_preset(HANDLE)), expected) == 0.0
    assert detect_format(HANDLE) == "keras_hub"
    backbone = kzoo.BertBackbone.from_preset(HANDLE)
    assert backbone.activation == "gelu_approximate"  # KerasHub's encoder GELU
    difference = max_difference(outputs(backbone), expected)
    print(f"kaggle:// handle ({layout}) on {keras.backend.backend()}: max |kzoo - keras_hub| {difference:.2e}")
    assert difference <= TOLERANCE
    assert no_network == []


def test_classifier_from_the_handle_fits_raw_text(preset, kaggle_cache, no_network):
    reference, _, directory = preset
    fill_kaggle_cache(kaggle_cache, MODEL, 2, directory)
    model = kzoo.BertClassifier.from_preset(HANDLE, num_classes=2)
    assert max_difference(outputs(model.backbone), outputs(reference)) <= TOLERANCE
    tokenizer = model.preprocessor.tokenizer
    assert tokenizer.get_vocabulary() == VOCABULARY and tokenizer.lowercase is True
    history = model.fit(TEXTS, LABELS, batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert model.predict(TEXTS, verbose=0).shape == (4, 2)
    assert no_network == []


def test_every_bert_class_resolves_the_handle(preset, kaggle_cache, no_network):
    _, reference, directory = preset
    fill_kaggle_cache(kaggle_cache, MODEL, 2, directory, layout="files")
    assert kzoo.BertBackbone.from_preset(HANDLE, dropout=0.0).dropout == 0.0  # overrides as for a directory
    tokenizer = kzoo.BertTokenizer.from_preset(HANDLE)
    sentences = ["Some TEXT", "good text abc", "xyz"]
    assert tokenizer(sentences).to_list() == [np.asarray(reference(s)).tolist() for s in sentences]
    assert kzoo.BertPreprocessor.from_preset(HANDLE, sequence_length=8)(["good"])["token_ids"].shape == (1, 8)
    tagger = kzoo.BertTokenClassifier.from_preset(HANDLE, num_classes=3)
    assert tagger.preprocessor.tokenizer.get_vocabulary() == VOCABULARY
    assert no_network == []


# === What is not cached: the clear error, before anything is built ===


def test_empty_cache_raises_before_building(kaggle_cache, no_network, monkeypatch):
    def build(*args, **kwargs):
        raise AssertionError("a model was built")

    monkeypatch.setattr(kzoo.BertBackbone, "__init__", build)
    with pytest.raises(ValueError) as raised:
        kzoo.BertClassifier.from_preset(HANDLE, num_classes=2)
    message = str(raised.value)
    assert message.startswith(f"{HANDLE!r} is a KerasHub preset on Kaggle Models, which is not (completely) "
                              f"in kagglehub's cache ({kaggle_cache}) and cannot be downloaded: the download failed")
    assert f"kagglehub.model_download('{MODEL}/2')" in message
    assert f"{kaggle_cache}/models/{MODEL} here (or point KAGGLEHUB_CACHE at a copy" in message
    assert "pass that directory to from_preset." in message
    assert "load_weights" not in message  # a handle's weights are part of it
    assert no_network  # kagglehub tried, and failed at once
    with pytest.raises(ValueError, match="is not \\(completely\\) in kagglehub's cache"):
        kzoo.BertTokenizer.from_preset(HANDLE)


@pytest.mark.parametrize("layout", ["no marker", "a file missing"])
def test_incomplete_downloads_are_not_used(preset, kaggle_cache, layout):
    _, _, directory = preset
    folder = kaggle_cache / "models" / MODEL
    if layout == "no marker":  # an interrupted download: the files, no <version>.complete
        shutil.copytree(directory, folder / "2")
    else:  # KerasHub fetched the backbone's files only
        fill_kaggle_cache(kaggle_cache, MODEL, 2, directory, layout="files")
        (folder / ".complete" / "2" / "assets" / "tokenizer" / "vocabulary.txt.complete").unlink()
    with pytest.raises(ValueError, match="is not \\(completely\\) in kagglehub's cache .* the download failed"):
        kzoo.BertBackbone.from_preset(HANDLE)


def test_a_handle_without_version_names_the_cached_ones(preset, kaggle_cache, no_network):
    _, _, directory = preset
    fill_kaggle_cache(kaggle_cache, MODEL, 2, directory)
    fill_kaggle_cache(kaggle_cache, MODEL, 3, directory, layout="files")
    with pytest.raises(ValueError) as raised:
        kzoo.BertBackbone.from_preset(f"kaggle://{MODEL}")
    message = str(raised.value)
    assert "it names no version, which only Kaggle can resolve to the latest one; the download failed" in message
    assert f"write the version: kaggle://{MODEL}/2 or kaggle://{MODEL}/3 (cached here)" in message
    assert no_network


@pytest.mark.parametrize("handle", ["kaggle://keras/bert", "kaggle://keras/bert/keras/bert_tiny_en_uncased/latest",
                                    "kaggle://keras/bert/keras/bert_tiny_en_uncased/0", "kaggle://a/b//c/1"])
def test_malformed_handles_say_what_a_handle_is(handle, no_network):
    with pytest.raises(ValueError, match=r"is not a Kaggle model handle: write kaggle://<owner>/<model>/<framework>/"):
        kzoo.BertBackbone.from_preset(handle)
    assert no_network == []


def test_a_kaggle_model_that_is_no_keras_hub_preset(kaggle_cache, tmp_path):
    other = tmp_path / "saved_model"
    other.mkdir()
    (other / "saved_model.pb").write_bytes(b"\0")
    fill_kaggle_cache(kaggle_cache, "someone/bert/tensorFlow2/en", 1, other)
    with pytest.raises(ValueError, match=r"is not a KerasHub preset: no config.json or tokenizer.json naming a keras_hub"):
        kzoo.BertBackbone.from_preset("kaggle://someone/bert/tensorFlow2/en/1")


def test_without_kagglehub_the_error_says_what_to_install(kaggle_cache, monkeypatch):
    monkeypatch.setitem(sys.modules, "kagglehub", None)  # comes with keras-hub, an optional dependency
    with pytest.raises(ImportError, match=r'kaggle:// handles are downloaded with kagglehub.*pip install "kzoo\[keras-hub\]"'):
        kzoo.BertBackbone.from_preset(HANDLE)
