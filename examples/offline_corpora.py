"""Real text that every Python installation has offline, read at run time.

`python_documentation()` collects the documentation shipped with CPython
itself: the reference-manual topics behind `help("TOPIC")`
(`pydoc_data.topics`) and the docstrings of the standard library's modules,
classes and functions. Each topic and each module is one document, its
paragraphs split into sentences: a document-level corpus for BERT's next
sentence prediction (BERT sec. 3.1).

`library_area_sentences()` labels the standard library's docstring
sentences with the area of the library their module belongs to, and
`library_area_task()` cuts them into a balanced training and held-out set: a
real-text classification task for fine-tuning (BERT sec. 4.1).

`docstring_search_pairs()` pairs each documented public function, class and
method of the standard library's one-line docstring summary (a query) with
the rest of its docstring (the document to find), and
`docstring_search_task()` splits the pairs by a hash of the qualified name: a
real-text retrieval task for sentence embeddings (Sentence-BERT).

`split_by_source_hash()` gives a stable held-out split of any such pairs. The
parallel corpus of the translation example is `message_catalogues.py`'s.
"""

import importlib
import inspect
import pkgutil
import random
import re
import sys
import warnings
import zlib

# Modules with side effects on import (windows, browsers, prints) or that are deprecated noise.
SKIPPED_MODULES = {
    "antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "ensurepip", "venv",
    "lib2to3", "pydoc_data", "xxlimited", "xxlimited_35", "xxsubtype", "_xxtestfuzz",
}
UNDERLINE = re.compile(r"[*=~^-]{3,}")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")
SIGNATURE = re.compile(r"^[\w.]+\(.*\)(\s*->.*)?$")  # "error(message: string)", "S.count(sub) -> int"


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
        except Exception:  # noqa: BLE001 (any import may fail: platform-specific or optional modules)
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
            except Exception:  # noqa: BLE001 (any import may fail)
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
    from pydoc_data.topics import topics  # noqa: PLC0415 (a large table, read only here)

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


def library_area_task(train_per_area, test_per_area, test_fraction=0.2, seed=0, areas=None):
    """`library_area_sentences()` as a classification task: a seeded shuffle,
    an 80/20 cut by sentence, then at most `train_per_area` training and
    `test_per_area` test sentences of each area, shuffled.

    Args:
        train_per_area: int. The most training sentences kept per area.
        test_per_area: int. The most held-out sentences kept per area.
        test_fraction: float. The fraction of all sentences held out before
            the caps. Defaults to `0.2`.
        seed: int. Seeds the shuffles and the sampling. Defaults to `0`.
        areas: `{area: top-level module names}` or `None`. Defaults to `None`:
            `LIBRARY_AREAS`.

    Returns:
        `(area_names, (train_texts, train_labels), (test_texts, test_labels))`:
        the sorted area names, then lists of sentences and of label indices
        into `area_names`.
    """
    rng = random.Random(seed)
    pairs = [(sentence, area) for sentence, area, _ in library_area_sentences(areas)]
    random.Random(seed).shuffle(pairs)
    cut = int(len(pairs) * (1 - test_fraction))
    names = sorted({area for _, area in pairs})
    parts = []
    for part, per_area in ((pairs[:cut], train_per_area), (pairs[cut:], test_per_area)):
        by_area = {name: [s for s, area in part if area == name] for name in names}
        kept = [(s, names.index(a)) for a in names for s in rng.sample(by_area[a], min(per_area, len(by_area[a])))]
        rng.shuffle(kept)
        parts.append(([s for s, _ in kept], [label for _, label in kept]))
    return names, parts[0], parts[1]


def library_area_documents(min_words=100, test_fraction=0.2, seed=0):
    """`library_area_sentences()` joined into documents: consecutive sentences
    of one module, in order, until a document has at least `min_words` words
    (about 130 WordPiece tokens at 100: every document fills BERT's 128), each
    labelled with its module's area. A full-length classification task,
    where padding to the batch's longest text saves nothing.

    Args:
        min_words: int. The fewest words a document has. Defaults to `100`.
        test_fraction: float. The share of documents held out. Defaults to `0.2`.
        seed: int. Seeds the shuffle before the cut. Defaults to `0`.

    Returns:
        `(area_names, (train_texts, train_labels), (test_texts, test_labels))`,
        as `library_area_task`.
    """
    by_module = {}
    for sentence, area, module in library_area_sentences():
        by_module.setdefault((area, module), []).append(sentence)
    documents, current = [], []
    for (area, _), sentences in sorted(by_module.items()):
        for sentence in sentences:
            current.append(sentence)
            if sum(len(s.split()) for s in current) >= min_words:
                documents.append((" ".join(current), area))
                current = []
        current = []  # a module's tail shorter than min_words is dropped
    random.Random(seed).shuffle(documents)
    names = sorted({area for _, area in documents})
    cut = int(len(documents) * (1 - test_fraction))
    return names, *(
        ([text for text, _ in part], [names.index(area) for _, area in part])
        for part in (documents[:cut], documents[cut:])
    )


# === Retrieval: a docstring's summary line finds the rest of its docstring ===


def _documented_objects(name):
    """`(qualified name, object)` for a module's public functions and classes
    (Python or C) and their classes' public methods, defined in the module itself."""
    module = sys.modules.get(name)
    for attribute, member in sorted(vars(module).items()) if module else ():
        if attribute.startswith("_") or getattr(member, "__module__", None) != name:
            continue
        if inspect.isclass(member) or inspect.isfunction(member) or inspect.isbuiltin(member):
            yield f"{name}.{attribute}", member
        if inspect.isclass(member):
            for method_name, method in sorted(vars(member).items()):
                routine = inspect.isfunction(method) or inspect.ismethoddescriptor(method)
                if routine and not method_name.startswith("_"):
                    yield f"{name}.{attribute}.{method_name}", method


def _summary_and_rest(docstring):
    """`(summary line, the rest)` of a PEP 257 docstring (one line, a blank
    line, then the body), white space normalised; `None` when the first
    paragraph is not one line, or is a signature rather than a summary."""
    summary, _, rest = inspect.cleandoc(docstring).partition("\n\n")
    if "\n" in summary.strip() or SIGNATURE.match(summary.strip()):
        return None
    return " ".join(summary.split()), " ".join(rest.split())


def docstring_search_pairs(min_words=10):
    """Query-document pairs from the standard library's docstrings: the
    one-line summary of each public function, class and method (`"Return the
    hash value for the given object."`) and the rest of its docstring, which
    a search should find from the summary.

    Docstrings whose first paragraph is longer than one line or is a call
    signature (`"S.count(sub) -> int"`) are skipped, as are those whose rest
    has fewer than `min_words` words. A summary or a rest that occurs more
    than once (inherited or shared docstrings) is kept only for the first
    qualified name in sorted order.

    Returns:
        A list of `(qualified_name, summary, rest)` triples, sorted by name.
    """
    found = []
    for name in _stdlib_modules():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # importing, or reading docstrings of, deprecated modules
            if name not in sys.modules:
                try:
                    importlib.import_module(name)
                except Exception:  # noqa: BLE001 (any import may fail: platform-specific or optional modules)
                    continue
            for qualified_name, member in _documented_objects(name):
                docstring = getattr(member, "__doc__", None)
                parts = _summary_and_rest(docstring) if isinstance(docstring, str) else None
                if parts and parts[0] and len(parts[1].split()) >= min_words:
                    found.append((qualified_name, *parts))
    pairs, seen = [], set()
    for qualified_name, summary, rest in sorted(found):
        if summary not in seen and rest not in seen:
            seen.update((summary, rest))
            pairs.append((qualified_name, summary, rest))
    return pairs


def docstring_search_task(held_out_fraction=0.2, seed=0, min_words=10):
    """`docstring_search_pairs()` as a retrieval task: held out by a hash of
    each qualified name (`split_by_source_hash`, so a function stays on its
    side whatever else changes), the training pairs shuffled with `seed`.

    Returns:
        `((train_queries, train_documents), (held_out_queries, held_out_documents))`:
        lists of strings, row i of the documents answering row i of the queries.
    """
    pairs = docstring_search_pairs(min_words)
    names = [qualified_name for qualified_name, _, _ in pairs]
    (_, train), (_, held_out) = split_by_source_hash(names, [pair[1:] for pair in pairs], held_out_fraction)
    random.Random(seed).shuffle(train)
    return tuple((([q for q, _ in part]), [d for _, d in part]) for part in (train, held_out))


def split_by_source_hash(sources, targets, held_out_fraction=0.1):
    """A train / held-out split that depends only on each source string (its
    CRC-32), so it is the same on every run, machine and corpus order.

    Returns:
        `((train_sources, train_targets), (held_out_sources, held_out_targets))`.
    """
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources but {len(targets)} targets: pass aligned lists.")
    if not 0.0 <= held_out_fraction <= 1.0:
        raise ValueError(f"held_out_fraction must be in [0, 1], got {held_out_fraction}.")
    train, held_out = ([], []), ([], [])
    for source, target in zip(sources, targets):
        part = held_out if zlib.crc32(source.encode("utf-8")) < held_out_fraction * 2**32 else train
        part[0].append(source)
        part[1].append(target)
    return train, held_out


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Sizes of the offline corpora the examples read.")
    parser.add_argument("--smoke", action="store_true",
                        help="the same run (a few seconds): every example script takes --smoke")
    parser.parse_args()
    documents = python_documentation()
    sentences = [s for d in documents for s in d]
    print(f"{len(documents)} documents, {len(sentences)} sentences, "
          f"{sum(len(s.split()) for s in sentences)} words")
    print("\n".join(documents[0][:5]))
    (train_queries, _), (held_out_queries, held_out_documents) = docstring_search_task()
    print(f"{len(train_queries)} + {len(held_out_queries)} held-out docstring summary -> rest pairs; "
          f"e.g. {held_out_queries[0]!r} -> {held_out_documents[0][:80]!r}...")
    from message_catalogues import message_catalog_pairs  # noqa: PLC0415 (the examples' folder is on the path)

    sources, targets = message_catalog_pairs()
    print(f"{len(sources)} English-German message pairs, {sum(len(s.split()) for s in sources)} "
          f"+ {sum(len(t.split()) for t in targets)} words")
