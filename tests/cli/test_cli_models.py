"""`kzoo fill-mask`, `attention`, `translate`, `pretrain`, `convert` and
`presets`, run through the command's entry point (in this process:
`cli_fixtures.run_here`) against the Python API on the same saved models.

The command's own code is the same on every backend, and the library under
it is tested on each: these run under one backend (tests/conftest.py; the
torch process of tests/run_all_backends.py), and the last test runs the
command on another. `test_cli_finetune.py` runs on every backend."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import kzoo
from tests.cli.cli_fixtures import (
    VOCABULARY,
    expect_error,
    run_here,
    save_classifier_preset,
    save_pretrainer_preset,
)

pytestmark = pytest.mark.backend_independent


def test_fill_mask_matches_the_python_api(tmp_path):
    model = save_pretrainer_preset(tmp_path / "pretrained")
    texts = ["a good [MASK] .", "[MASK] film is [MASK]"]
    result = run_here("fill-mask", tmp_path / "pretrained", *texts, "--top-k", "3", "--json")
    assert result.returncode == 0, result.stderr[-4000:]
    found = [json.loads(line) for line in result.stdout.splitlines()]
    assert [entry["text"] for entry in found] == texts
    for entry, expected in zip(found, model.fill_mask(texts, top_k=3)):
        assert [[c["token"] for c in mask] for mask in entry["masks"]] == [[t for t, _ in m] for m in expected]
        np.testing.assert_allclose([[c["probability"] for c in mask] for mask in entry["masks"]],
                                   [[p for _, p in m] for m in expected], atol=1e-6)
    table = run_here("fill-mask", tmp_path / "pretrained", "a good [MASK] .", "--top-k", "2")
    assert table.returncode == 0 and table.stdout.splitlines()[1].startswith("  [MASK] 1: "), table.stdout


def test_fill_mask_refuses_a_model_without_a_trained_mlm_head(tmp_path):
    save_classifier_preset(tmp_path / "classifier")
    expect_error(run_here("fill-mask", tmp_path / "classifier", "a good [MASK] ."),
                 "has no trained masked-LM head (it holds a BertClassifier)")


def test_attention_draws_every_layer_and_head(tmp_path):
    save_classifier_preset(tmp_path / "classifier")
    result = run_here("attention", tmp_path / "classifier", "a very good film", "--pair", "good plot",
                 "--out", tmp_path / "map.png", "--heads", "1")
    assert result.returncode == 0, result.stderr[-4000:]
    picture = (tmp_path / "map.png").read_bytes()
    assert picture.startswith(b"\x89PNG")
    width, height = int.from_bytes(picture[16:20], "big"), int.from_bytes(picture[20:24], "big")
    assert 150 <= width <= 600 and 150 <= height <= 600, (width, height)  # one layer x one head, a colour bar


def test_translate_matches_the_python_api(tmp_path):
    vocabulary = ["[PAD]", "[UNK]", "[BOS]", "[EOS]", "a", "b", "c", "d"]
    preprocessor = kzoo.TransformerPreprocessor(kzoo.TransformerTokenizer(vocabulary), 8, 8)
    model = kzoo.Transformer(vocabulary_size=len(vocabulary), num_layers=1, num_heads=2, hidden_dim=16,
                             intermediate_dim=32, max_sequence_length=64)
    model(preprocessor(["a b"], ["c d"])[0])
    (tmp_path / "model").mkdir()
    model.save(tmp_path / "model" / "transformer_translation.keras")
    preprocessor.save_to_preset(tmp_path / "model" / "preprocessor")
    sources = ["a b", "b c d", "d", "a a b b"]
    (tmp_path / "sources.txt").write_text("\n".join(sources) + "\n")
    result = run_here("translate", tmp_path / "model", "--input", tmp_path / "sources.txt", "--output",
                 tmp_path / "out.txt", "--beam-size", "2", "--batch-size", "3")
    assert result.returncode == 0, result.stderr[-4000:]
    expected = kzoo.translate(model, preprocessor, sources, batch_size=3, beam_size=2)
    assert (tmp_path / "out.txt").read_text().split("\n")[:-1] == expected
    assert "translating: 4/4 sentences" in result.stderr


def test_pretrain_writes_a_preset_that_fill_mask_reads(tmp_path):
    corpus = tmp_path / "shards"
    corpus.mkdir()
    words = VOCABULARY[5:] + ["the", "story", "was", "long"]
    generator = np.random.default_rng(0)
    for shard in range(2):
        documents = [[" ".join(generator.choice(words, 6)) + "." for _ in range(4)] for _ in range(6)]
        (corpus / f"part{shard}.txt").write_text("\n\n".join("\n".join(d) for d in documents) + "\n")
    result = run_here("pretrain", "--corpus", corpus / "*.txt", "--output", tmp_path / "pretrained",
                 "--vocabulary-size", "60", "--steps", "4", "--batch-size", "4", "--sequence-length", "16",
                 "--dupe-factor", "1")
    assert result.returncode == 0, result.stderr[-4000:]
    assert "corpus: 12 documents, 48 sentences" in result.stdout
    model = kzoo.BertPretrainer.from_preset(tmp_path / "pretrained")
    assert model.backbone.hidden_dim == 128 and model.backbone.num_layers == 2  # bert_tiny's architecture
    assert model.tokenizer.vocabulary_size() <= 60 * 1.05 + 5  # learned from the corpus, not bert_tiny's 30,522
    assert (tmp_path / "pretrained" / "training_curves.png").read_bytes().startswith(b"\x89PNG")
    assert run_here("fill-mask", tmp_path / "pretrained", "the [MASK] was long.").returncode == 0


def test_convert_writes_hugging_face(tmp_path):
    save_pretrainer_preset(tmp_path / "kzoo")
    result = run_here("convert", tmp_path / "kzoo", tmp_path / "hf", "--format", "huggingface")
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.startswith("Wrote a BertPretrainer (")
    assert {"config.json", "model.safetensors", "vocab.txt"} <= set(os.listdir(tmp_path / "hf"))
    expect_error(run_here("convert", tmp_path / "nowhere", tmp_path / "out"), "nowhere")


def test_presets_lists_names_sizes_and_weights():
    result = run_here("presets", "--family", "bert", "--details")
    assert result.returncode == 0, result.stderr
    table = {line.split()[0]: line for line in result.stdout.splitlines()[1:] if line and ":" not in line[:20]}
    assert "4,385,920" in table["bert_tiny"] and "google/bert_uncased_L-2_H-128_A-2" in table["bert_tiny"]
    assert "bert_tiny: " in result.stdout  # --details: the descriptions


def test_backend_option_wins_over_the_environment_and_python_m_kzoo_switches(tmp_path):
    """`--backend` decides, and `python -m kzoo` (which loaded Keras on
    KERAS_BACKEND's backend) reruns itself on the backend asked for. The environment names
    TensorFlow, which kzoo imports anyway, and `--backend` torch, which compiles no step: the
    cheapest pair of processes (4 s of CPU less than torch, then JAX)."""
    environment_backend, other = "tensorflow", "torch"
    save_classifier_preset(tmp_path / "start")
    (tmp_path / "train.csv").write_text("text,label\ngood film,positive\nbad film,negative\n")
    arguments = ["finetune", str(tmp_path / "start"), "--train", str(tmp_path / "train.csv"), "--output",
                 str(tmp_path / "model"), "--epochs", "1", "--sequence-length", "8", "--backend", other]
    environment = dict(os.environ, KERAS_BACKEND=environment_backend, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, "-m", "kzoo", *arguments], capture_output=True, text=True,
                            env=environment)
    assert result.returncode == 0, result.stderr[-4000:]
    assert json.loads((tmp_path / "model" / "metadata.json").read_text())["backend"] == other


@pytest.mark.parametrize("command", ["predict", "translate"])
def test_missing_model_directory(tmp_path, command):
    (tmp_path / "texts.txt").write_text("good film\n")
    expect_error(run_here(command, tmp_path / "absent", "--input", tmp_path / "texts.txt"), "absent")
