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


# The areas of the standard library, after the chapters of the Library Reference
# (https://docs.python.org/3/library/), merged into seven groups. Modules whose
# chapter is a grab-bag (built-ins, data types, runtime and language services,
# import machinery, generic OS services other than `os` and `io`) are left out.
LIBRARY_AREAS = {
    "text processing": (
        "re", "difflib", "textwrap", "string", "unicodedata", "stringprep", "readline",
        "rlcompleter", "codecs", "gettext", "locale", "shlex",
    ),
    "files and directories": (
        "os", "io", "pathlib", "posixpath", "ntpath", "genericpath", "fileinput", "stat",
        "filecmp", "tempfile", "glob", "fnmatch", "linecache", "shutil",
    ),
    "data formats and compression": (
        "pickle", "pickletools", "copyreg", "shelve", "marshal", "dbm", "sqlite3", "zlib", "gzip",
        "bz2", "lzma", "zipfile", "tarfile", "csv", "configparser", "tomllib", "netrc", "plistlib",
        "json", "struct", "base64", "binascii", "quopri", "uu", "xdrlib", "chunk", "xml",
    ),
    "numbers and math": ("numbers", "math", "cmath", "decimal", "fractions", "random", "statistics"),
    "concurrency": (
        "threading", "multiprocessing", "concurrent", "subprocess", "sched", "queue",
        "contextvars", "asyncio", "selectors", "select", "signal",
    ),
    "internet": (
        "socket", "ssl", "email", "mailbox", "mimetypes", "html", "webbrowser", "wsgiref",
        "urllib", "http", "ftplib", "poplib", "imaplib", "smtplib", "uuid", "socketserver",
        "xmlrpc", "ipaddress", "telnetlib", "nntplib", "smtpd", "cgi",
    ),
    "debugging and testing": (
        "pdb", "bdb", "doctest", "unittest", "timeit", "trace", "tracemalloc", "profile",
        "cProfile", "pstats", "faulthandler", "traceback", "pydoc",
    ),
}


def _routine_sentences(name):
    """Sentences of the docstrings of a module's functions and methods written
    in C (`math.sqrt`, `decimal.Decimal.quantize`), which `_module_document` skips."""
    module = sys.modules.get(name)
    texts = []
    for attribute, member in sorted(vars(module).items()) if module else ():
        if attribute.startswith("_") or getattr(member, "__module__", None) != name:
            continue
        if inspect.isbuiltin(member):
            texts.append(inspect.getdoc(member) or "")
        if inspect.isclass(member):
            texts.extend(
                inspect.getdoc(method) or ""
                for method_name, method in sorted(vars(member).items())
                if not method_name.startswith("_") and inspect.ismethoddescriptor(method)
            )
    return [s for text in texts for s in _sentences(text)]


def library_area_sentences(areas=None):
    """Sentences of the standard library's docstrings, labelled with the area
    of the library that their module belongs to: a real-text classification
    task that every Python installation has offline (BERT sec. 4.1's
    single-sentence classification).

    Args:
        areas: `{area: top-level module names}`; `LIBRARY_AREAS` by default.
            A package's submodules (`email.mime`, `asyncio.tasks`) go with it.

    Returns:
        A list of `(sentence, area, module)` triples, `module` the top-level
        module the sentence documents (to split by module). A sentence that
        occurs more than once (shared or inherited docstrings) is kept once,
        and not at all if it occurs in two areas.
    """
    areas = LIBRARY_AREAS if areas is None else areas
    area_of = {module: area for area, modules in areas.items() for module in modules}
    found = {}
    for name in _stdlib_modules():
        top = name.split(".")[0]
        if top not in area_of:
            continue
        for sentence in _module_document(name) + _routine_sentences(name):
            found.setdefault(sentence, set()).add((area_of[top], top))
    return [
        (sentence, *sorted(places)[0])
        for sentence, places in found.items()
        if len({area for area, _ in places}) == 1
    ]


if __name__ == "__main__":
    documents = python_documentation()
    sentences = [s for d in documents for s in d]
    print(f"{len(documents)} documents, {len(sentences)} sentences, "
          f"{sum(len(s.split()) for s in sentences)} words")
    print("\n".join(documents[0][:5]))
