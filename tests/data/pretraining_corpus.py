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
