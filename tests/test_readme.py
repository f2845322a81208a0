"""The README's Python snippets run as written (offline, on the current backend), in order, in one namespace."""

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import kzoo

README = Path(__file__).resolve().parents[1] / "README.md"
TEXT = README.read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, re.S)


@pytest.mark.backend_independent  # reads files: once (tests/conftest.py)
def test_readme_is_short():
    assert len(TEXT.splitlines()) <= 250


@pytest.mark.backend_independent  # reads files: once (tests/conftest.py)
def test_readme_links_reach_files():
    links = re.findall(r"\]\(((?!https?://)[^)#]+)", TEXT)
    assert len(links) >= 10
    missing = [link for link in links if not (README.parent / link).exists()]
    assert not missing, missing


@pytest.mark.backend_independent  # reads files: once (tests/conftest.py)
def test_readme_commands_are_ci_commands():
    """The README's test command is the one `.ci/run` runs, and the docs command installs the docs extra."""
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    command = 'pip install -c constraints.txt -e ".[all]" && python tests/run_all_backends.py --examples'
    assert command in TEXT
    assert "python tests/run_all_backends.py --examples" in ci
    assert 'pip install -c constraints.txt -e ".[docs]" && mkdocs serve' in TEXT


@pytest.mark.once  # the API it shows is tested on every backend; one backend per run (tests/conftest.py)
def test_readme_python_examples_run(tmp_path, monkeypatch):
    assert len(BLOCKS) == 8
    monkeypatch.chdir(tmp_path)  # the snippets write files (a corpus, a vocabulary, presets, a SavedModel)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    namespace = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "random weights" from presets
        for block in BLOCKS:
            exec(compile(block, str(README), "exec"), namespace)
    ns = namespace
    # Fine-tuned on raw text with label names; predictions are names.
    assert "loss" in ns["finetuning"].history and len(ns["finetuning"].history["loss"]) == 1
    assert len(ns["predicted"]) == 2 and set(ns["predicted"]) <= set(ns["areas"])
    assert ns["logits"].shape == (2, 2)
    # Pre-trained: both heads' metrics, and a preset directory.
    assert sorted(ns["pretraining"].history) == ["loss", "mlm_accuracy", "mlm_loss", "nsp_accuracy", "nsp_loss"]
    assert np.isfinite(ns["pretraining"].history["loss"][0])
    assert (tmp_path / "my_bert" / "config.json").exists() and (tmp_path / "vocab.txt").exists()
    # Translation: teacher forcing shifts the target by one; one string per source.
    x, labels = ns["x"], np.asarray(ns["labels"])
    assert tuple(x["encoder_token_ids"].shape) == (100, 16) and labels.shape == (100, 16)
    decoder, label_row = np.asarray(x["decoder_token_ids"])[0], labels[0]
    length = int((label_row != 0).sum())  # [BOS] + target in, target + [EOS] out
    assert decoder[0] == 2 and label_row[length - 1] == 3
    np.testing.assert_array_equal(decoder[1 : length], label_row[: length - 1])
    assert len(ns["translations"]) == 1 and isinstance(ns["translations"][0], str)
    # The SavedModel serves the Keras model's probabilities and class names.
    probabilities = np.asarray(ns["response"]["probabilities"])
    logits = np.asarray(ns["logits"], "float64")
    expected = np.exp(logits - logits.max(-1, keepdims=True))
    np.testing.assert_allclose(probabilities, expected / expected.sum(-1, keepdims=True), atol=1e-4)
    names = [name.decode() for name in np.asarray(ns["response"]["class_names"])]
    assert names == ns["predicted"]
    # One CPU: no engine, one replica; the restored pre-trainer trains on.
    assert ns["distributed"].num_replicas == 1
    assert len(ns["distributed_run"].history["loss"]) == 1
    # LoRA: 2% of the weights train; validation curves; the best epoch kept as a preset; a small adapter.
    adapted = ns["adapted"]
    assert sum(int(np.prod(v.shape)) for v in adapted.trainable_weights) == 446_210  # 2 areas: a head of 770
    assert len(ns["history"].history["val_loss"]) == 2 and "val_accuracy" in ns["history"].history
    assert kzoo.BertClassifier.from_preset(tmp_path / "areas_lora").backbone.get_config()["lora"]["rank"] == 8
    assert 1.7e6 < (tmp_path / "areas.lora.h5").stat().st_size < 2.0e6
    # Embeddings of unit length; each query finds its text; one epoch on pairs.
    np.testing.assert_allclose(np.linalg.norm(ns["vectors"], axis=1), 1.0, atol=1e-5)
    assert ns["vectors"].shape == (3, 384) and ns["indices"][:, 0].tolist() == [2, 1]
    assert np.isfinite(ns["tuning"].history["loss"][0])
