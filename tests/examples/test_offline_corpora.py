"""examples/offline_corpora.py and message_catalogues.py: the docstring retrieval
pairs, and the parallel corpus: the gettext .mo reader (on catalogues written
here, in UTF-8 and ISO-8859-1, both byte orders), the cleaning of message pairs
into sentence-like pairs, and the stable split.
Never reads the machine's own catalogues."""

import gettext
import importlib.util
import os
import struct

import pytest

pytestmark = pytest.mark.backend_independent  # plain Python data code: run once (conftest.py)



def _example_module(name):
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(os.path.dirname(__file__), "..", "..", "examples", f"{name}.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


offline_corpora = _example_module("offline_corpora")
message_catalogues = _example_module("message_catalogues")


def write_mo(path, messages, charset="UTF-8", byte_order="<"):
    """A .mo file (GNU gettext's format: magic, revision, N, the offsets of the
    original and translation tables, no hash table) with a header entry."""
    header = f"Content-Type: text/plain; charset={charset}\nLast-Translator: Jörg Müller\n"
    entries = {"": header, **messages}
    keys = sorted(entries, key=lambda k: k.encode(charset))
    originals = [k.encode(charset) for k in keys]
    translations = [entries[k].encode(charset) for k in keys]
    count = len(keys)
    offset = 28 + 16 * count
    tables, blob = [[], []], b""
    for table, strings in zip(tables, (originals, translations)):
        for string in strings:
            table.append(struct.pack(byte_order + "2I", len(string), offset + len(blob)))
            blob += string + b"\x00"
    header = struct.pack(byte_order + "7I", 0x950412DE, 0, count, 28, 28 + 8 * count, 0, 0)
    with open(path, "wb") as f:
        f.write(header + b"".join(tables[0] + tables[1]) + blob)


MESSAGES = {
    "Open file": "Datei öffnen",
    "Cannot open %s": "Kann %s nicht öffnen",
    "menu\x04_Quit": "_Beenden",
    "%d file\x00%d files": "%d Datei\x00%d Dateien",
}


@pytest.mark.parametrize("byte_order", ["<", ">"], ids=["little-endian", "big-endian"])
@pytest.mark.parametrize("charset", ["UTF-8", "ISO-8859-1"])
def test_read_mo_file_round_trips(tmp_path, charset, byte_order):
    path = tmp_path / "tiny.mo"
    write_mo(path, MESSAGES, charset, byte_order)
    messages = message_catalogues.read_mo_file(path)
    assert messages.pop("").startswith(f"Content-Type: text/plain; charset={charset}\n")
    assert messages == MESSAGES


def test_stdlib_gettext_agrees_on_utf8_and_fails_on_latin1(tmp_path):
    """Why the module parses .mo files itself: the stdlib reads the UTF-8
    catalogue as we do, but decodes the header as UTF-8 before it knows the
    charset, so it raises on an ISO-8859-1 one with a translator's name in it."""
    write_mo(tmp_path / "utf8.mo", MESSAGES, "UTF-8")
    with open(tmp_path / "utf8.mo", "rb") as f:
        translations = gettext.GNUTranslations(f)
    assert translations.gettext("Open file") == "Datei öffnen"
    assert translations.pgettext("menu", "_Quit") == "_Beenden"
    assert translations.ngettext("%d file", "%d files", 2) == "%d Dateien"
    write_mo(tmp_path / "latin1.mo", MESSAGES, "ISO-8859-1")
    with pytest.raises(UnicodeDecodeError), open(tmp_path / "latin1.mo", "rb") as f:
        gettext.GNUTranslations(f)


def test_read_mo_file_rejects_other_files(tmp_path):
    (tmp_path / "not.mo").write_bytes(b"hello, this is not a catalogue")
    with pytest.raises(ValueError, match="not a gettext .mo file"):
        message_catalogues.read_mo_file(tmp_path / "not.mo")
    write_mo(tmp_path / "cut.mo", MESSAGES)
    (tmp_path / "cut.mo").write_bytes((tmp_path / "cut.mo").read_bytes()[:40])
    with pytest.raises(ValueError, match="truncated"):
        message_catalogues.read_mo_file(tmp_path / "cut.mo")


def test_message_catalog_pairs_cleans_and_deduplicates(tmp_path):
    directory = tmp_path / "de" / "LC_MESSAGES"
    directory.mkdir(parents=True)
    write_mo(directory / "a.mo", {
        "Save _As…": "Speichern _unter …",  # accelerators
        "&Print": "&Drucken",
        "%d file\x00%d files": "%d Datei\x00%d Dateien",  # plural → singular
        "verb\x04Open": "Öffnen",  # context dropped
        "  Too   many\n spaces ": "Zu viele\tLeerzeichen",  # white space
        "%s: %s": "%s: %s",  # format only (and identical)
        "{}: {name}": "{}: {name} ",  # format only
        "OK": "OK",  # identical
        "one two three four": "eins zwei drei vier fünf",  # target too long for max_words=4
        "Quit": "Beenden",
    })
    write_mo(directory / "b.mo", {"Quit": "Verlassen", "Grüße": "Grüße aus Köln"}, "ISO-8859-1")
    (directory / "broken.mo").write_bytes(b"\x00" * 10)
    (directory / "readme.txt").write_text("not a catalogue")
    with pytest.warns(UserWarning, match="broken.mo"):
        sources, targets = message_catalogues.message_catalog_pairs("de", tmp_path, max_words=4)
    assert list(zip(sources, targets)) == [
        ("Too many spaces", "Zu viele Leerzeichen"),
        ("%d file", "%d Datei"),
        ("Print", "Drucken"),
        ("Quit", "Beenden"),  # a.mo comes first: b.mo's "Verlassen" is a duplicate source
        ("Save As…", "Speichern unter …"),
        ("Open", "Öffnen"),
        ("Grüße", "Grüße aus Köln"),
    ]
    with pytest.raises(ValueError, match="No gettext catalogues for 'fr'"):
        message_catalogues.message_catalog_pairs("fr", tmp_path)


def test_split_by_source_hash_is_stable_and_disjoint():
    sources = [f"message number {i}" for i in range(2000)]
    targets = [f"Nachricht Nummer {i}" for i in range(2000)]
    (train, held_out) = offline_corpora.split_by_source_hash(sources, targets, 0.1)
    assert 160 <= len(held_out[0]) <= 240  # 10% of 2000, binomial sd ~13
    assert len(train[0]) + len(held_out[0]) == 2000 and not set(train[0]) & set(held_out[0])
    assert all(t == "Nachricht Nummer " + s.split()[-1] for s, t in zip(*held_out))
    # The same split whatever the order and the rest of the corpus.
    reversed_split = offline_corpora.split_by_source_hash(sources[::-1][:1000], targets[::-1][:1000], 0.1)
    assert set(reversed_split[1][0]) == set(held_out[0]) & set(sources[1000:])
    assert offline_corpora.split_by_source_hash(sources, targets, 0.0)[1] == ([], [])
    with pytest.raises(ValueError, match="aligned"):
        offline_corpora.split_by_source_hash(sources, targets[:5])


def test_summary_and_rest_takes_pep257_docstrings_only():
    summary_and_rest = offline_corpora._summary_and_rest
    assert summary_and_rest("Return x.\n\n    The rest,\n    on two lines.\n") == ("Return x.", "The rest, on two lines.")
    assert summary_and_rest("A summary that goes\non over two lines.\n\nThe rest.") is None
    assert summary_and_rest("S.count(sub[, start]) -> int\n\nReturn the count.") is None
    assert summary_and_rest("error(message: string)\n\nPrint a usage message.") is None


def test_docstring_search_task_is_stable_disjoint_and_aligned():
    (train_queries, train_documents), (queries, documents) = offline_corpora.docstring_search_task()
    assert len(train_queries) == len(train_documents) > 500 and len(queries) == len(documents) > 100
    assert not set(train_queries) & set(queries) and not set(train_documents) & set(documents)
    assert len(set(queries)) == len(queries) and len(set(documents)) == len(documents)
    pairs = {summary: rest for _, summary, rest in offline_corpora.docstring_search_pairs()}
    assert all(pairs[q] == d for q, d in zip(queries + train_queries, documents + train_documents))
    assert (queries, documents) == offline_corpora.docstring_search_task(seed=1)[1]  # the seed shuffles training only
