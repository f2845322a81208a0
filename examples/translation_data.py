"""Parallel text for the translation example and benchmark, split three ways.

`translation_splits()` reads the corpus (the gettext catalogues of
`message_catalogues.message_catalog_pairs()` by default, or two aligned plain-text
files, one sentence a line) and splits it into training, development and test
pairs by message identity (`message_identity`), so that the test set is not a
near-copy of training: software messages come in variants ("Error: %s",
"error %d", "Move window to workspace 3"), and a split by exact source sends
about 10% of held-out messages to the test set with a variant left in
training (204 of 2,157 in the earlier 5% split of the catalogues). Here every
variant of a message falls on the same side, and the development and test
sets keep one pair per message.

`examples/transformer_translation.py` and `benchmarks/translation.py` read
their data through it.
"""

import zlib

from message_catalogues import PLACEHOLDER, WORD, message_catalog_pairs


def message_identity(sentence):
    """What makes two sources the same message: their words of two or more
    letters, lower-cased, without format placeholders, digits or punctuation
    (the sentence itself, lower-cased, when it has no such word).

    Example:

    >>> message_identity("Error: %s"), message_identity("error %d")
    ('error', 'error')
    >>> message_identity("Move window to workspace 12")
    'move window to workspace'
    """
    words = WORD.findall(PLACEHOLDER.sub(" ", sentence).lower())
    return " ".join(words) if words else " ".join(sentence.lower().split())


def split_by_identity(sources, targets, dev_fraction=0.025, test_fraction=0.025):
    """Training, development and test pairs by a hash (CRC-32) of each source's
    `message_identity`: the same on every run, machine and corpus order, and
    every variant of a message on one side. The development and test sets keep
    the first pair of each message; training keeps every pair. A source in the
    test set therefore appears in neither training nor development (nor does
    any variant of it).

    Args:
        sources: list of str. The source sentences.
        targets: list of str. Their translations, aligned with `sources`.
        dev_fraction: float. The share of messages for development. Defaults to `0.025`.
        test_fraction: float. The share of messages for testing. Defaults to `0.025`.

    Returns:
        `{"train": (sources, targets), "dev": (...), "test": (...)}`, lists of str.

    Example:

    >>> splits = split_by_identity(["Open %s", "open %d", "Close"], ["%s öffnen", "%d öffnen", "Schließen"],
    ...                            dev_fraction=0.0, test_fraction=0.5)
    >>> {name: len(part[0]) for name, part in splits.items()}
    {'train': 2, 'dev': 0, 'test': 1}
    """
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources but {len(targets)} targets: pass aligned lists.")
    if min(dev_fraction, test_fraction) < 0 or dev_fraction + test_fraction > 1:
        raise ValueError(f"dev_fraction={dev_fraction} and test_fraction={test_fraction} must be >= 0 "
                         "and sum to at most 1.")
    splits = {name: ([], []) for name in ("train", "dev", "test")}
    seen = set()
    for source, target in zip(sources, targets):
        identity = message_identity(source)
        place = zlib.crc32(identity.encode("utf-8")) / 2**32
        name = "test" if place < test_fraction else "dev" if place < test_fraction + dev_fraction else "train"
        if name != "train":
            if identity in seen:
                continue
            seen.add(identity)
        splits[name][0].append(source)
        splits[name][1].append(target)
    return splits


def read_parallel_text(source_path, target_path, max_words=30):
    """Aligned sentence pairs from two plain-text files, one sentence a line:
    white space normalised, pairs with an empty side or a side of more than
    `max_words` words dropped.

    Returns:
        `(sources, targets)`: two lists of str.
    """
    with open(source_path, encoding="utf-8") as f:
        sources = f.read().splitlines()
    with open(target_path, encoding="utf-8") as f:
        targets = f.read().splitlines()
    if len(sources) != len(targets):
        raise ValueError(f"{source_path} has {len(sources)} lines but {target_path} has {len(targets)}: "
                         "give aligned files, one sentence a line.")
    pairs = [(" ".join(s.split()), " ".join(t.split())) for s, t in zip(sources, targets)]
    pairs = [(s, t) for s, t in pairs if s and t and max(len(s.split()), len(t.split())) <= max_words]
    return [s for s, _ in pairs], [t for _, t in pairs]


def translation_splits(source_path=None, target_path=None, language="de", max_words=30,
                       dev_fraction=0.025, test_fraction=0.025):
    """The translation corpus split by `split_by_identity`: the English→`language`
    gettext catalogues by default, or the pairs of two aligned files.

    Returns:
        `{"train": (sources, targets), "dev": (...), "test": (...)}`.
    """
    if (source_path is None) != (target_path is None):
        raise ValueError("Give both a source and a target file, or neither (the gettext catalogues).")
    if source_path is None:
        sources, targets = message_catalog_pairs(language, max_words=max_words)
    else:
        sources, targets = read_parallel_text(source_path, target_path, max_words)
    return split_by_identity(sources, targets, dev_fraction, test_fraction)


def describe(splits):
    """`"39,500 training, 1,050 development, 1,040 test pairs"`."""
    sizes = [f"{len(splits[name][0]):,} {label}" for name, label in
             (("train", "training"), ("dev", "development"), ("test", "test"))]
    return ", ".join(sizes) + " pairs"
