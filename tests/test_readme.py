"""The README's Python examples run as written (offline, on the current backend)."""

import re
import warnings
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_readme_python_examples_run(tmp_path, monkeypatch):
    assert len(BLOCKS) >= 2
    monkeypatch.chdir(tmp_path)  # the examples write files (a vocabulary)
    namespace = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "random weights" from presets
        for block in BLOCKS:
            exec(compile(block, str(README), "exec"), namespace)
    assert tuple(namespace["outputs"]["sequence_output"].shape) == (1, 5, 768)
    assert tuple(namespace["batch"]["token_ids"].shape) == (1, 16)
    assert sorted(namespace["history"].history) == [
        "loss", "mlm_accuracy", "mlm_loss", "nsp_accuracy", "nsp_loss"
    ]
    assert (tmp_path / "my_bert" / "task.weights.h5").exists()
    assert namespace["logits"].shape == (1, 2)
    assert tuple(namespace["response"]["probabilities"].shape) == (1, 2)  # the SavedModel, served
    np.testing.assert_allclose(
        namespace["restored"].predict(["The cat sat."], verbose=0), namespace["classifier"].predict(["The cat sat."], verbose=0), atol=1e-6
    )
    assert namespace["model"].preprocessor.sequence_length == 64
    assert tuple(namespace["tokens"].shape) == (1, 8)
    decoder, labels = np.asarray(namespace["x"]["decoder_token_ids"])[0], np.asarray(namespace["labels"])[0]
    length = int((labels != 0).sum())  # [BOS] + target in, target + [EOS] out
    assert decoder[0] == 2 and labels[length - 1] == 3
    np.testing.assert_array_equal(decoder[1:length], labels[: length - 1])
