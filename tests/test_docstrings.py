"""Every docstring example runs (offline, under one backend), every public
object documents itself with an example and its arguments as KerasHub does
(`name: type. What it is. Defaults to ...`), and the public objects of the papers'
code (models, layers, data, tokenizers, training recipes) cite the paper
section they implement; plumbing (presets, checkpoints, backend code,
distribution) cites none for the sake of it."""

import doctest
import importlib
import inspect
import pkgutil
import re

import keras
import pytest

import kzoo
import kzoo.data
import kzoo.layers
import kzoo.tokenizers
import kzoo_cli


def _modules():
    for package in (kzoo, kzoo_cli):  # the library, and the `kzoo` command beside it
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}."):
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
    """Examples of the tf.data / tokenizer code, which no Keras backend runs (conftest.py)."""
    return test.name.startswith(("kzoo.data.", "kzoo.tokenizers.")) or test.name.split(".")[-2].endswith("_tokenizer")


# The serving functions wrap models in TensorFlow graphs: under TensorFlow only.
TENSORFLOW_ONLY = ("kzoo.export.serving.", "kzoo.export.answer_spans.")


def _marks(test):
    """Data examples are backend independent; the others show the API, whose
    behaviour the tests beside this file check on every backend: each runs
    under one backend when tests/run_all_backends.py divides the runs
    (conftest.py), the serving examples and those that export a SavedModel under TensorFlow."""
    if _data_only(test):
        return [pytest.mark.backend_independent]
    if test.name.startswith(TENSORFLOW_ONLY):
        return [pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="TensorFlow serving functions")]
    if any(".export(" in example.source for example in test.examples):
        return [pytest.mark.once(backend="tensorflow")]  # in-process export: 3-4 s against 8-10 under torch
    return [pytest.mark.once]


def test_docstring_examples_were_found():
    assert len(DOCTESTS) >= 20, [t.name for t in DOCTESTS]


@pytest.mark.parametrize(
    "test",
    [pytest.param(t, marks=_marks(t)) for t in DOCTESTS],
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


# KerasHub's argument style: `name: type. What it is. Defaults to ...`; the type
# is short and starts with a type word, a dotted or capitalised class name or
# a `backticked` name ("int", "str or os.PathLike", "kzoo.BertTokenizer",
# "int tensor of shape (batch, length)", "list of str", "callable").
TYPE_WORDS = {
    "int", "float", "bool", "str", "bytes", "list", "tuple", "dict", "set",
    "callable", "tensor", "array", "iterable", "sequence", "generator", "None",
}
ARGUMENT_TYPE = re.compile(r"(?P<type>\S(?:[^.]|\.(?=\S))*?)\.(?:\s|$)")


def _argument_entries(doc, section="Args:"):
    """`{name: entry}` of a Google-style docstring's `section`s (`Args:`,
    `Call arguments:`), each entry's lines joined ("*", "**" stay in the name)."""
    entries, lines = {}, doc.expandtabs().splitlines()
    for start, header in enumerate(lines):
        if header.strip() != section:
            continue
        header_indent, entry_indent, name = len(header) - len(header.lstrip()), None, None
        for line in lines[start + 1:]:
            indent = len(line) - len(line.lstrip())
            if line.strip() and indent <= header_indent:
                break
            if not line.strip():
                continue
            entry_indent = indent if entry_indent is None else entry_indent
            match = re.match(r"(\*{0,2}\w+): ?(.*)", line.strip()) if indent == entry_indent else None
            if match:
                name = match[1]
                entries[name] = match[2]
            elif name is not None:
                entries[name] += " " + line.strip()
    return entries


def _has_argument_type(entry):
    """Whether `entry` starts with a short type and a period: `int. ...`."""
    match = ARGUMENT_TYPE.match(entry)
    if not match or len(match["type"]) > 80:
        return False
    first = match["type"].split()[0].strip("`,")
    return first in TYPE_WORDS or "." in first or first[:1].isupper()


@pytest.mark.parametrize("name,obj", PUBLIC, ids=[n for n, _ in PUBLIC])
def test_public_arguments_are_documented_as_keras_hub_does(name, obj):
    target = obj.__init__ if inspect.isclass(obj) else obj
    if not callable(target):
        return
    try:
        parameters = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        return
    if inspect.isclass(obj) and parameters and parameters[0].name == "self":
        parameters = parameters[1:]
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    parameters = [p for p in parameters if p.kind not in variadic]
    entries = _argument_entries(inspect.getdoc(obj) or "")
    if inspect.isclass(obj) and "__init__" in vars(obj):  # its own, not Keras' docstring
        entries.update(_argument_entries(inspect.cleandoc(obj.__init__.__doc__ or "")))
    missing = [p.name for p in parameters if p.name not in entries]
    untyped = [p.name for p in parameters if p.name in entries and not _has_argument_type(entries[p.name])]
    no_default = [
        p.name for p in parameters
        if p.name in entries and p.default is not inspect.Parameter.empty and "Defaults to" not in entries[p.name]
    ]
    assert not (missing or untyped or no_default), (
        f"{name}'s `Args:` section does not document its arguments as KerasHub does "
        f"(`name: type. What it is. Defaults to ...`): missing {missing}, "
        f"without `type. ` {untyped}, without a `Defaults to` sentence {no_default}"
    )
