"""Real text that every Python installation has offline, read at run time.

`python_documentation()` collects the documentation shipped with CPython
itself: the reference-manual topics behind `help("TOPIC")`
(`pydoc_data.topics`) and the docstrings of the standard library's modules,
classes and functions. Each topic and each module is one document, its
paragraphs split into sentences: a document-level corpus for BERT's next
sentence prediction (BERT sec. 3.1).
"""

import importlib
import inspect
import pkgutil
import re
import sys
import warnings

# Modules with side effects on import (windows, browsers, prints) or that are deprecated noise.
SKIPPED_MODULES = {
    "antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "ensurepip", "venv",
    "lib2to3", "pydoc_data", "xxlimited", "xxlimited_35", "xxsubtype", "_xxtestfuzz",
}
UNDERLINE = re.compile(r"[*=~^-]{3,}")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")


def _sentences(text):
    """Prose sentences of a docstring or manual page: code, tables and headings dropped."""
    sentences = []
    for paragraph in re.split(r"\n\s*\n", text):
        lines = paragraph.strip().splitlines()
        if not lines or lines[0].startswith((">>>", "...", "+", "=", "*", "-", "|")):
            continue
        if paragraph.startswith("   ") and not paragraph.strip()[0].isupper():
            continue  # indented code
        prose = UNDERLINE.sub(" ", " ".join(line.strip() for line in lines))
        if len(prose.split()) < 4:
            continue  # headings and signatures
        sentences.extend(s for s in SENTENCE_END.split(prose) if len(s.split()) >= 3)
    return sentences


def _module_document(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            module = importlib.import_module(name)
        except Exception:  # platform-specific or optional modules
            return []
    texts = [inspect.getdoc(module) or ""]
    for attribute, member in sorted(vars(module).items()):
        if attribute.startswith("_") or getattr(member, "__module__", None) != name:
            continue
        if inspect.isclass(member) or inspect.isfunction(member):
            texts.append(inspect.getdoc(member) or "")
        if inspect.isclass(member):  # methods documented in the class itself
            texts.extend(
                inspect.getdoc(method) or ""
                for method_name, method in sorted(vars(member).items())
                if not method_name.startswith("_") and inspect.isfunction(method)
            )
    return [s for text in texts for s in _sentences(text)]


def _stdlib_modules():
    """Public standard-library modules, packages' submodules included."""
    for name in sorted(sys.stdlib_module_names):
        if name.startswith("_") or name in SKIPPED_MODULES:
            continue
        yield name
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                package = importlib.import_module(name)
            except Exception:
                continue
        for info in pkgutil.iter_modules(getattr(package, "__path__", []), prefix=name + "."):
            if not any(part.startswith("_") or "test" in part for part in info.name.split(".")):
                yield info.name


def python_documentation(min_sentences=4):
    """Documents (lists of sentences) from CPython's own documentation.

    Returns:
        A list of documents, each with at least `min_sentences` sentences:
        the manual topics first, then one document per standard-library module.
    """
    from pydoc_data.topics import topics

    documents = [_sentences(text) for _, text in sorted(topics.items())]
    documents.extend(_module_document(name) for name in _stdlib_modules())
    return [d for d in documents if len(d) >= min_sentences]


if __name__ == "__main__":
    documents = python_documentation()
    sentences = [s for d in documents for s in d]
    print(f"{len(documents)} documents, {len(sentences)} sentences, "
          f"{sum(len(s.split()) for s in sentences)} words")
    print("\n".join(documents[0][:5]))
