"""A generated, document-level corpus for the pre-training tests (never downloaded).

Every document draws its words from its own topic (a slice of the stem list),
so a NotNext partner is recognisable from its words: next sentence prediction
is learnable by a tiny model in a few epochs. Within a sentence the stems
follow the topic's cyclic order from a random start, so a masked stem is
predictable from its neighbours (the masked LM loss can fall far below
chance). Words are a stem, optionally followed by a `##` suffix piece, so
whole word masking has multi-piece words.
"""

import numpy as np

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
RESERVED_TOKENS = ["[unused0]", "[unused1]"]
SUFFIXES = ["##s", "##ing", "##ed", "##ly"]
CONSONANTS = "bcdfghjklmnprstvz"
VOWELS = "aeiou"


def _stems(count, rng):
    stems = set()
    while len(stems) < count:
        syllables = rng.integers(1, 4)
        stems.add("".join(rng.choice(list(CONSONANTS)) + rng.choice(list(VOWELS)) for _ in range(syllables)))
    return sorted(stems)


STEMS = _stems(160, np.random.default_rng(0))
VOCABULARY = SPECIAL_TOKENS + RESERVED_TOKENS + ["."] + STEMS + SUFFIXES
SPECIAL_IDS = [VOCABULARY.index(t) for t in SPECIAL_TOKENS + RESERVED_TOKENS]
NUM_TOPICS = 8


def make_documents(num_documents, sentences_per_document=(4, 12), words_per_sentence=(4, 24), seed=0):
    """A list of documents (lists of sentence strings); document d uses topic d % NUM_TOPICS."""
    rng = np.random.default_rng(seed)
    topic_size = len(STEMS) // NUM_TOPICS
    documents = []
    for d in range(num_documents):
        topic = STEMS[(d % NUM_TOPICS) * topic_size : (d % NUM_TOPICS + 1) * topic_size]
        sentences = []
        for _ in range(rng.integers(*sentences_per_document, endpoint=True)):
            start = rng.integers(len(topic))
            words = [
                topic[(start + i) % len(topic)] + (rng.choice(SUFFIXES)[2:] if rng.random() < 0.15 else "")
                for i in range(rng.integers(*words_per_sentence, endpoint=True))
            ]
            sentences.append(" ".join(words) + ".")
        documents.append(sentences)
    return documents


def write_text_files(folder, documents, num_files):
    """The documents in google-research's format (a sentence per line, a blank
    line after each document), dealt in order over `num_files` files
    `part-{i}.txt`; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    size = -(-len(documents) // num_files)
    paths = []
    for index in range(num_files):
        path = folder / f"part-{index}.txt"
        path.write_text("".join("\n".join(d) + "\n\n" for d in documents[index * size : (index + 1) * size]))
        paths.append(path)
    return paths


def collect(dataset):
    """Concatenates every batch of one pass into numpy arrays."""
    parts = {}
    for features, labels in dataset.as_numpy_iterator():
        for name, value in {**features, **labels}.items():
            parts.setdefault(name, []).append(value)
    return {name: np.concatenate(values) for name, values in parts.items()}


def original_ids(batch):
    """The unmasked sequences: masked inputs with the labels put back."""
    ids = batch["token_ids"].copy()
    rows, slots = np.nonzero(batch["mask_weights"])
    ids[rows, batch["mask_positions"][rows, slots]] = batch["mask_ids"][rows, slots]
    return ids


def maskable(ids, padding_mask):
    return ~np.isin(ids, SPECIAL_IDS) & (padding_mask == 1)


def assert_masking_statistics(batch, max_predictions):
    """BERT's masking statistics (sec. 3.1, A.1) over more than 100,000
    maskable tokens: 15% of them chosen (within 0.005), exactly
    `min(P, max(1, round(0.15 n)))` per sequence (round half to even), and
    80% / 10% / 10% of the chosen ones `[MASK]` / random / unchanged (within 0.015)."""
    ids = original_ids(batch)
    n = maskable(ids, batch["padding_mask"]).sum(axis=1)
    assert n.sum() > 100_000
    weights = batch["mask_weights"]
    chosen = weights.sum()
    assert abs(chosen / n.sum() - 0.15) <= 0.005, chosen / n.sum()
    expected = np.minimum(max_predictions, np.maximum(1, np.round(0.15 * n)))
    np.testing.assert_array_equal(weights.sum(axis=1), expected)

    rows, slots = np.nonzero(weights)
    positions = batch["mask_positions"][rows, slots]
    before = batch["mask_ids"][rows, slots]
    after = batch["token_ids"][rows, positions]
    mask = VOCABULARY.index("[MASK]")
    to_mask = np.mean(after == mask)
    to_random = np.mean((after != mask) & (after != before))
    unchanged = np.mean(after == before)
    # A random draw equal to the original (1 in ~400) counts as unchanged.
    assert abs(to_mask - 0.8) <= 0.015, to_mask
    assert abs(to_random - 0.1) <= 0.015, to_random
    assert abs(unchanged - 0.1) <= 0.015, unchanged


def segment_lengths(batch):
    """The lengths of A and B in each packed `[CLS] A [SEP] B [SEP]` example."""
    sep = VOCABULARY.index("[SEP]")
    ids = original_ids(batch)
    first_sep = np.argmax(ids == sep, axis=1)
    return first_sep - 1, batch["padding_mask"].sum(axis=1) - first_sep - 2
