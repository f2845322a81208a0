"""The documentation site's pages: every Python block runs, and the API reference covers the public names.

Each page's ```python (or ```py) blocks run in order in one namespace of their own, in a temporary
working directory, offline. A block that cannot run here (it needs your files, the network or a GPU)
is marked by an HTML comment on the line before its fence, `<!-- no-test: why -->`.
"""

import importlib
import re
import types
import warnings
from pathlib import Path

import numpy as np
import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
NO_TEST = re.compile(r"<!--\s*no-test:\s*\S.*-->")


def python_blocks(page):
    """(code, skipped) for each Python block of `page`, in order."""
    text = (DOCS / page).read_text(encoding="utf-8")
    blocks = []
    for match in re.finditer(r"^```(?:python|py)\b[^\n]*\n(.*?)^```", text, re.S | re.M):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        blocks.append((match.group(1), bool(NO_TEST.search(before))))
    return blocks


TESTED = [page for page in PAGES if any(not skipped for _, skipped in python_blocks(page))]


def check_getting_started(ns):
    assert tuple(ns["outputs"]["sequence_output"].shape) == (1, 5, 128)
    assert tuple(ns["outputs"]["pooled_output"].shape) == (1, 128)


def check_fine_tuning(ns, tmp_path):
    assert ns["logits"].shape == (1, 2)
    np.testing.assert_allclose(
        ns["restored"].predict(["The cat sat."], verbose=0), ns["logits"], atol=1e-5
    )
    assert ns["model"].preprocessor.sequence_length == 64
    assert (tmp_path / "my_classifier" / "config.json").exists()


def check_pretraining(ns, tmp_path):
    assert tuple(ns["batch"]["token_ids"].shape) == (1, 16)
    assert sorted(ns["history"].history) == ["loss", "mlm_accuracy", "mlm_loss", "nsp_accuracy", "nsp_loss"]
    assert (tmp_path / "my_bert" / "config.json").exists()
    assert ns["vocabulary"][:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def check_translation(ns):
    assert len(ns["translations"]) == 2 and all(isinstance(t, str) for t in ns["translations"])
    assert np.asarray(ns["tokens"]).shape[0] == 1


def check_presets(ns):
    assert ns["presets"]["bert_base_uncased"].parameters == 109_482_240
    assert tuple(ns["hf_restored"](np.array([[5, 6, 7]]))["sequence_output"].shape) == (1, 3, 32)


def check_pictures(ns, tmp_path):
    assert (tmp_path / "attention.png").stat().st_size > 0
    assert (tmp_path / "pretraining.png").stat().st_size > 0


def check_deploy(ns):
    assert tuple(ns["response"]["probabilities"].shape) == (1, 2)
    assert ns["quantized"].predict(["The cat sat."], verbose=0).shape == (1, 2)
    assert tuple(ns["vectors"].shape) == (2, 128)  # the embedder's SavedModel


def check_distributed(ns):
    assert ns["distributed"].num_replicas == 1
    assert ns["distributed"].global_batch_size(32) == 32
    assert ns["learning_rate"] == pytest.approx(1.25e-5)
    assert len(ns["history"].history["loss"]) == 1


def check_guarantees(ns, tmp_path):
    assert "1" in ns["message"] and "NoneType" in ns["message"], ns["message"]
    assert len(ns["history"].history["loss"]) == 2
    assert not (tmp_path / "my_classifier_backup").exists()  # deleted once fit completes


CHECKS = {
    "guides/getting-started.md": check_getting_started,
    "guides/fine-tuning.md": check_fine_tuning,
    "guides/pretraining.md": check_pretraining,
    "guides/translation.md": check_translation,
    "guides/presets-and-checkpoints.md": check_presets,
    "guides/pictures.md": check_pictures,
    "guides/deploy.md": check_deploy,
    "guides/distributed.md": check_distributed,
    "guides/guarantees.md": check_guarantees,
}


@pytest.mark.backend_independent  # reads files: once (tests/conftest.py)
def test_every_guide_is_tested():
    guides = [page for page in PAGES if page.startswith("guides/") and page != "guides/command-line.md"]
    assert set(guides) <= set(TESTED), sorted(set(guides) - set(TESTED))
    assert set(CHECKS) <= set(TESTED)
    skipped = [page for page in PAGES for _, s in python_blocks(page) if s]
    assert len(skipped) <= 3, skipped  # kept rare


def _once(page):
    """Each page under one backend when the runs are divided (conftest.py): the pages show the API,
    which the tests beside this file check on every backend, and the examples' smoke runs use it on
    all three. A page that exports SavedModels under TensorFlow, where they are traced in the process
    (deploy.md: 12 s of CPU, against 18 under torch, where each export is a TensorFlow process)."""
    exports = any(".export(" in code for code, skipped in python_blocks(page) if not skipped)
    return pytest.mark.once(backend="tensorflow") if exports else pytest.mark.once


@pytest.mark.parametrize("page", [pytest.param(page, marks=_once(page)) for page in TESTED])
def test_page_python_blocks_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    namespace = {"__name__": f"docs.{page}"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "random weights" from presets
        for code, skipped in python_blocks(page):
            if not skipped:
                exec(compile(code, str(DOCS / page), "exec"), namespace)
    check = CHECKS.get(page)
    if check is not None:
        check(*(namespace, tmp_path)[: check.__code__.co_argcount])


SUBPACKAGES = ["layers", "data", "tokenizers", "distribution", "export", "visualize", "presets", "checkpoints"]


def public_names(module):
    """`__all__`, else the names not starting with "_" that are kzoo's own classes and functions or constants."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [
        name for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
        and (name.isupper() or (callable(value) and getattr(value, "__module__", "").startswith("kzoo")))
    ]


def documented_objects():
    """The objects of every `::: dotted.path` entry of docs/api/."""
    objects = []
    for page in sorted((DOCS / "api").glob("*.md")):
        for path in re.findall(r"^::: ([\w.]+)\s*$", page.read_text(encoding="utf-8"), re.M):
            parts = path.split(".")
            for i in range(len(parts), 0, -1):  # the longest importable prefix, then attributes
                try:
                    value = importlib.import_module(".".join(parts[:i]))
                except ImportError:
                    continue
                for part in parts[i:]:
                    value = getattr(value, part)  # an entry that names nothing fails here
                break
            objects.append(value)
    return objects


@pytest.mark.backend_independent  # reads files: once (tests/conftest.py)
def test_api_reference_covers_public_names():
    import kzoo

    documented = documented_objects()
    expected = [(f"kzoo.{name}", getattr(kzoo, name)) for name in kzoo.__all__]
    for sub in SUBPACKAGES:
        module = importlib.import_module(f"kzoo.{sub}")
        expected += [(f"kzoo.{sub}.{name}", getattr(module, name)) for name in public_names(module)]
    missing = [name for name, value in expected if not any(value is d for d in documented)]
    assert not missing, f"no API page documents {missing}"
