"""Parallel text that Debian installs offline: the gettext message catalogues
(.mo files) of installed programs, read at run time.

`message_catalog_pairs()` collects English→German (or another language's)
message pairs from them: a small parallel corpus for the Transformer's
translation task (Vaswani et al., 2017, sec. 5.1); `read_mo_file()` reads one
catalogue. `translation_data.py` splits the pairs for the translation example
and benchmark.
"""

import codecs
import os
import re
import struct
import warnings

MO_MAGIC = 0x950412DE
# printf / Python format placeholders ("%s", "%1$-10lu", "{}", "{name}").
PLACEHOLDER = re.compile(
    r"%(\d+\$)?[-+ #0']*(\d+|\*)?(\.(\d+|\*))?(hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGaAcspm%]"
    r"|\{[^{}\s]*\}"
)
# Keyboard accelerator markers at the start of a word: GTK's "_Open", Qt's "&Open".
ACCELERATOR = re.compile(r"(?<!\w)[_&](?=\w)")
WORD = re.compile(r"[^\W\d_]{2,}")  # two or more letters


def read_mo_file(path):
    """The messages of a compiled gettext catalogue, `{msgid: msgstr}`.

    The .mo format (GNU gettext manual, "The Format of GNU MO Files"): a magic
    number that gives the byte order, a revision, the number of strings N and
    the offsets of two tables of N `(length, offset)` pairs, the original
    strings and their translations. Keys keep gettext's encoding of contexts
    (`"context\\x04msgid"`) and plurals (`"singular\\x00plural"`, translated
    `"form0\\x00form1..."`); the header is the translation of `""`. Strings are
    decoded with the charset the header declares (the standard library's
    `gettext.GNUTranslations` decodes the header as UTF-8 before it reads that
    charset, and fails on ISO-8859-1 catalogues whose header has a non-ASCII
    translator's name, such as net-tools').
    """
    with open(path, "rb") as f:
        data = f.read()
    order = next((o for o in "<>" if data[:4] == struct.pack(o + "I", MO_MAGIC)), None)
    if order is None or len(data) < 20:
        raise ValueError(f"{path} is not a gettext .mo file (it does not start with 0x950412de).")
    revision, count, originals, translations = struct.unpack(order + "4I", data[4:20])
    if revision >> 16 > 1 or max(originals, translations) + 8 * count > len(data):
        raise ValueError(f"{path}: unsupported .mo revision {revision >> 16} or truncated file.")

    def strings(table):
        pairs = struct.iter_unpack(order + "2I", data[table : table + 8 * count])
        return [data[offset : offset + length] for length, offset in pairs]

    raw = dict(zip(strings(originals), strings(translations)))
    header = raw.get(b"", b"").decode("ascii", "replace")
    charset = re.search(r"charset=([\w.:-]+)", header)
    charset = charset.group(1) if charset else "utf-8"
    try:
        codecs.lookup(charset)
        return {key.decode(charset): value.decode(charset) for key, value in raw.items()}
    except (LookupError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: cannot decode with its declared charset {charset!r}: {error}") from error


def _clean_message(text):
    """One message as a sentence-like line: the singular of a plural, no
    context, no accelerator markers, white space normalised."""
    text = text.split("\x04")[-1].split("\x00")[0]
    return " ".join(ACCELERATOR.sub("", text).split())


def message_catalog_pairs(language="de", locale_dir="/usr/share/locale", max_words=30):
    """English→`language` message pairs from the installed gettext catalogues
    (`<locale_dir>/<language>/LC_MESSAGES/*.mo`), read at run time.

    Each catalogue translates its program's English messages; the pairs are
    cleaned into sentence-like training pairs: the header entry dropped,
    plural forms reduced to the singular, contexts and accelerator markers
    (`_`, `&`) removed, white space normalised; pairs dropped when either side
    has no word of two or more letters outside format placeholders (`%s`,
    `{}`), or more than `max_words` words, or when the translation equals the
    source; then deduplicated by source (the first catalogue in name order wins).

    Returns:
        `(sources, targets)`: two lists of strings, English and `language`.
    """
    directory = os.path.join(locale_dir, language, "LC_MESSAGES")
    if not os.path.isdir(directory):
        raise ValueError(f"No gettext catalogues for {language!r}: {directory} does not exist.")
    pairs = {}
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".mo"):
            continue
        try:
            messages = read_mo_file(os.path.join(directory, name))
        except ValueError as error:
            warnings.warn(f"Skipping a catalogue: {error}")
            continue
        for msgid, msgstr in messages.items():
            source, target = _clean_message(msgid), _clean_message(msgstr)
            if not source or source == target or source in pairs:
                continue
            if max(len(source.split()), len(target.split())) > max_words:
                continue
            if all(WORD.search(PLACEHOLDER.sub(" ", text)) for text in (source, target)):
                pairs[source] = target
    return list(pairs), list(pairs.values())
