"""Every docstring example runs (offline, on the current backend), every public
object documents itself with an example, and the public objects of the papers'
code (models, layers, data, tokenizers, training recipes) cite the paper
section they implement; plumbing (presets, checkpoints, backend code,
distribution) cites none for the sake of it."""

import doctest
import importlib
import inspect
import pkgutil
import re

import pytest

import kzoo
import kzoo.data
import kzoo.layers
import kzoo.tokenizers


def _modules():
    for info in pkgutil.walk_packages(kzoo.__path__, prefix="kzoo."):
        yield importlib.import_module(info.name)


def _doctests():
    finder = doctest.DocTestFinder(exclude_empty=True)
    tests = []
    for module in _modules():
        for test in finder.find(module):
            if test.examples and test.name.startswith(module.__name__):
                tests.append(test)
    return tests


DOCTESTS = _doctests()


def _data_only(test):
    """Examples of the tf.data / tokenizer code, which no Keras backend runs:
    once, under TensorFlow (conftest.py)."""
    return test.name.startswith(("kzoo.data.", "kzoo.tokenizers.")) or test.name.split(".")[-2].endswith("_tokenizer")


def test_docstring_examples_were_found():
    assert len(DOCTESTS) >= 20, [t.name for t in DOCTESTS]


@pytest.mark.parametrize(
    "test",
    [pytest.param(t, marks=[pytest.mark.backend_independent] if _data_only(t) else []) for t in DOCTESTS],
    ids=lambda t: t.name,
)
def test_docstring_example_runs(test):
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {test.name}"


PUBLIC = [(f"kzoo.{n}", getattr(kzoo, n)) for n in kzoo.__all__ if not inspect.ismodule(getattr(kzoo, n))] + [
    (f"kzoo.{module.__name__.split('.')[-1]}.{n}", getattr(module, n))
    for module in (kzoo.layers, kzoo.data, kzoo.tokenizers)
    for n in module.__all__
]
PAPER_CITATION = re.compile(r"(sec\. \d|eq\. \d|Table \d|Figure \d)")
# The papers' code: models (training recipes included), layers, data, tokenizers.
PAPER_CODE = ("kzoo.models.", "kzoo.layers.", "kzoo.data.", "kzoo.tokenizers.")
# Plumbing, inside those packages or beside them (a module path part, or a
# family's `*_checkpoints` module): no paper section to cite.
PLUMBING = {
    "backend", "checkpoints", "convert", "distribution", "presets",
    "backbone", "task", "preprocessor", "serialization",  # kzoo.models' base classes
}


def _cites_papers(module_name):
    parts = module_name.split(".")
    is_plumbing = any(part in PLUMBING or part.endswith("_checkpoints") for part in parts)
    return module_name.startswith(PAPER_CODE) and not is_plumbing


def test_plumbing_is_told_apart_from_the_papers_code():
    assert _cites_papers("kzoo.models.bert.bert_backbone")
    assert _cites_papers("kzoo.tokenizers.wordpiece_tokenizer")
    assert not _cites_papers("kzoo.presets")
    assert not _cites_papers("kzoo.models.bert.bert_checkpoints")
    assert not _cites_papers("kzoo.backend.jax")
    assert not _cites_papers("kzoo.models.task")
    assert _cites_papers("kzoo.models.bert.bert_preprocessor")


@pytest.mark.parametrize("name,obj", PUBLIC, ids=[n for n, _ in PUBLIC])
def test_public_object_has_example_and_citation(name, obj):
    doc = inspect.getdoc(obj) or ""
    module = inspect.getmodule(obj)
    module_doc = inspect.getdoc(module) or ""
    has_example = ">>>" in doc or (inspect.isclass(obj) and any(">>>" in (inspect.getdoc(m) or "") for m in vars(obj).values()))
    assert has_example, f"{name} has no runnable example"
    if _cites_papers(module.__name__):
        assert PAPER_CITATION.search(doc + module_doc), f"{name} cites no paper section"
