"""examples/translation_data.py: the translation corpus split by message
identity (no test source, nor a variant of it, in training or development)
and two aligned plain-text files as a corpus. Never reads the machine's own
catalogues."""

import os
import sys

import pytest

pytestmark = pytest.mark.backend_independent  # plain Python data code: run once (conftest.py)

_EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
sys.path.insert(0, _EXAMPLES)  # it imports offline_corpora by name, as the example does
try:
    import translation_data
finally:
    sys.path.remove(_EXAMPLES)


def word(i):
    """A distinct word of letters for each i (digits are not part of a message's identity)."""
    letters = ""
    for _ in range(3):
        i, rest = divmod(i, 26)
        letters += chr(ord("a") + rest)
    return letters


def corpus(count=3000):
    """Each message three times: as written, with a placeholder and punctuation, with a number."""
    sources, targets = [], []
    for i in range(count):
        for variant in (f"Open {word(i)} file", f"open {word(i)} file: %s", f"Open {word(i)} file 3"):
            sources.append(variant)
            targets.append(variant.replace("Open", "Öffne").replace("open", "öffne"))
    return sources, targets


def test_split_keeps_every_variant_on_one_side_and_test_apart():
    sources, targets = corpus()
    splits = translation_data.split_by_identity(sources, targets, dev_fraction=0.05, test_fraction=0.05)
    train, dev, test = (set(splits[name][0]) for name in ("train", "dev", "test"))
    identity = translation_data.message_identity
    assert not test & (train | dev) and not dev & train
    train_identities = {identity(s) for s in train}
    assert not {identity(s) for s in test | dev} & train_identities  # no variant left behind in training
    # Development and test keep one pair per message; training keeps all three variants.
    for name in ("dev", "test"):
        assert 100 <= len(splits[name][0]) <= 200  # 5% of 3,000 messages, binomial sd ~12
        assert len({identity(s) for s in splits[name][0]}) == len(splits[name][0])
    assert len(train) == 3 * len(train_identities)
    assert all(t.startswith(("Öffne", "öffne")) and s.split()[1] == t.split()[1]
               for name in splits for s, t in zip(*splits[name]))  # pairs stay aligned
    # The same split whatever the order of the corpus.
    backwards = translation_data.split_by_identity(sources[::-1], targets[::-1], 0.05, 0.05)
    assert {identity(s) for s in backwards["test"][0]} == {identity(s) for s in test}
    with pytest.raises(ValueError, match="aligned"):
        translation_data.split_by_identity(sources, targets[:5])
    with pytest.raises(ValueError, match="sum to at most 1"):
        translation_data.split_by_identity(sources, targets, 0.6, 0.6)


def test_identity_ignores_case_placeholders_digits_and_punctuation():
    identity = translation_data.message_identity
    assert identity("Cannot open '%s': %d") == identity("cannot open %1$s") == "cannot open"
    assert identity("Move window to workspace 12") == identity("Move window to workspace 3")
    assert identity("Open file") != identity("Close file")
    assert identity(" 42 %s ") == "42 %s"  # no word: the sentence itself


def test_parallel_text_files_are_a_corpus(tmp_path):
    source, target = tmp_path / "train.en", tmp_path / "train.de"
    source.write_text("Hello  world\n\nA very long line indeed\nGood night\n", encoding="utf-8")
    target.write_text("Hallo Welt\nLeer\nEine sehr lange Zeile\nGute Nacht\n", encoding="utf-8")
    assert translation_data.read_parallel_text(source, target, max_words=3) == (
        ["Hello world", "Good night"], ["Hallo Welt", "Gute Nacht"])  # empty and long pairs dropped
    splits = translation_data.translation_splits(source, target, max_words=3, dev_fraction=0, test_fraction=0)
    assert splits["train"] == (["Hello world", "Good night"], ["Hallo Welt", "Gute Nacht"])
    assert translation_data.describe(splits) == "2 training, 0 development, 0 test pairs"
    target.write_text("Hallo Welt\n", encoding="utf-8")
    with pytest.raises(ValueError, match="aligned files"):
        translation_data.read_parallel_text(source, target)
    with pytest.raises(ValueError, match="both a source and a target"):
        translation_data.translation_splits(source)
