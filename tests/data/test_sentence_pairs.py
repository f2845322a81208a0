"""Next sentence prediction pairs (BERT sec. 3.1): statistics over > 100,000 tokens.

The corpus here is made of unique token ids (token i is the integer i), so a
span's origin is exact: B follows A iff the ids of A + B are consecutive, and
the document of any token is known from its id.
"""

import numpy as np
import pytest

from kzoo.data import TokenizedCorpus, sentence_pairs
from kzoo.data.sentence_pairs import IS_NEXT, NOT_NEXT, _PairGenerator, longest_first_trim, sentence_pair_spans

pytestmark = pytest.mark.backend_independent  # TensorFlow data code: run once (conftest.py)

SEQUENCE_LENGTH = 128


def unique_id_corpus(num_documents=700, seed=0):
    rng = np.random.default_rng(seed)
    sentences_per_document = rng.integers(1, 16, size=num_documents)
    sentence_lengths = rng.integers(1, 60, size=sentences_per_document.sum())
    return TokenizedCorpus(
        token_ids=np.arange(sentence_lengths.sum(), dtype=np.int32),
        sentence_splits=np.concatenate([[0], np.cumsum(sentence_lengths)]),
        document_splits=np.concatenate([[0], np.cumsum(sentences_per_document)]),
    )


@pytest.fixture(scope="module")
def corpus():
    return unique_id_corpus()


@pytest.fixture(scope="module")
def pairs(corpus):
    return sentence_pairs(corpus, SEQUENCE_LENGTH, seed=3, progress=False)


def document_of(corpus, token_ids):
    first_token_of_document = corpus.sentence_splits[corpus.document_splits]
    return np.searchsorted(first_token_of_document, token_ids, side="right") - 1


def is_consecutive(ids):
    return bool(np.all(np.diff(ids) == 1))


def test_corpus_is_large_enough(corpus, pairs):
    assert len(corpus.token_ids) > 100_000
    assert sum(len(a) + len(b) for a, b in zip(pairs.segment_a, pairs.segment_b)) > 100_000


def test_is_next_is_half_of_the_pairs(pairs):
    fraction = np.mean(pairs.next_sentence_label == IS_NEXT)
    assert abs(fraction - 0.5) <= 0.02, fraction
    assert set(np.unique(pairs.next_sentence_label)) == {IS_NEXT, NOT_NEXT}


def test_every_example_fits_and_no_span_is_empty(pairs):
    lengths_a = np.array([len(a) for a in pairs.segment_a])
    lengths_b = np.array([len(b) for b in pairs.segment_b])
    assert lengths_a.min() >= 1 and lengths_b.min() >= 1
    assert (lengths_a + lengths_b).max() <= SEQUENCE_LENGTH - 3
    # Most examples use the full length (the rest aim short with probability 0.1).
    assert np.mean(lengths_a + lengths_b >= 0.75 * (SEQUENCE_LENGTH - 3)) > 0.6


def test_is_next_b_directly_follows_a_in_its_document(corpus, pairs):
    for a, b, label, document in zip(*pairs):
        if label != IS_NEXT:
            continue
        joined = np.concatenate([a, b])
        assert is_consecutive(joined), (a, b)
        assert set(document_of(corpus, joined)) == {document}


def test_not_next_b_comes_from_another_document(corpus, pairs):
    partner_documents = []
    for a, b, label, document in zip(*pairs):
        if label != NOT_NEXT:
            continue
        assert is_consecutive(a) and set(document_of(corpus, a)) == {document}
        origin = set(document_of(corpus, b))
        assert document not in origin and len(origin) == 1, (document, origin)
        assert is_consecutive(b)
        partner_documents.append(origin.pop())
    # Partners are spread over the corpus, not always the same neighbour.
    assert len(set(partner_documents)) > 0.5 * (len(corpus.document_splits) - 1)


def test_every_sentence_is_used_by_some_pair(corpus, pairs):
    used = np.zeros(len(corpus.token_ids), bool)
    for a, b, label, _ in zip(*pairs):
        used[a] = True
        if label == IS_NEXT:
            used[b] = True
    # Truncation drops some tokens; whole sentences are never skipped.
    assert used.mean() > 0.9


def test_seeded_pairs_are_reproducible(corpus):
    first = sentence_pairs(corpus, 64, seed=11, progress=False)
    second = sentence_pairs(corpus, 64, seed=11, progress=False)
    other = sentence_pairs(corpus, 64, seed=12, progress=False)
    assert all(np.array_equal(x, y) for x, y in zip(first.segment_a, second.segment_a))
    assert np.array_equal(first.next_sentence_label, second.next_sentence_label)
    assert not np.array_equal(first.next_sentence_label[:100], other.next_sentence_label[:100])


def test_dupe_factor_multiplies_the_examples(corpus):
    once = sentence_pairs(corpus, 64, seed=0, progress=False)
    twice = sentence_pairs(corpus, 64, seed=0, dupe_factor=2, progress=False)
    assert 1.8 < len(twice.next_sentence_label) / len(once.next_sentence_label) < 2.2


def test_without_nsp_single_segments_of_consecutive_text(corpus):
    pairs = sentence_pairs(corpus, SEQUENCE_LENGTH, next_sentence_prediction=False, seed=0, progress=False)
    assert all(len(b) == 0 for b in pairs.segment_b)
    assert all(1 <= len(a) <= SEQUENCE_LENGTH - 2 and is_consecutive(a) for a in pairs.segment_a)
    assert set(np.unique(pairs.next_sentence_label)) == {IS_NEXT}


@pytest.mark.parametrize(
    "length_a,length_b,budget,expected",
    [(10, 4, 8, (6, 0)), (4, 10, 8, (0, 6)), (5, 5, 7, (1, 2)), (6, 5, 7, (2, 2)), (3, 3, 6, (0, 0)), (9, 9, 2, (8, 8))],
)
def test_longest_first_trim(length_a, length_b, budget, expected):
    assert longest_first_trim(length_a, length_b, budget) == expected
    # Same as google-research/bert's truncate_seq_pair, one token at a time.
    a, b = length_a, length_b
    while a + b > budget:
        if a > b:
            a -= 1
        else:
            b -= 1
    assert (length_a - a, length_b - b) == expected


def test_nsp_needs_two_documents():
    corpus = TokenizedCorpus(np.arange(10, dtype=np.int32), np.array([0, 5, 10]), np.array([0, 2]))
    with pytest.raises(ValueError, match="at least two documents.*next_sentence_prediction=False"):
        sentence_pairs(corpus, 32, progress=False)
    # No shorter target length (10% by default): the document is one segment.
    single = sentence_pairs(corpus, 32, next_sentence_prediction=False, short_sequence_probability=0.0, progress=False)
    assert len(single.segment_a) == 1


def test_too_short_sequence_length_is_refused(corpus):
    with pytest.raises(ValueError, match="sequence_length=4 is too short"):
        sentence_pairs(corpus, 4, progress=False)


@pytest.mark.parametrize("next_sentence_prediction", [True, False])
def test_spans_are_the_pairs_as_offsets(corpus, next_sentence_prediction):
    """`sentence_pair_spans` gives the examples of `sentence_pairs` (same
    seed), each span as [start, end) offsets into the corpus."""
    kwargs = dict(next_sentence_prediction=next_sentence_prediction, dupe_factor=2, seed=7, progress=False)
    pairs = sentence_pairs(corpus, SEQUENCE_LENGTH, **kwargs)
    spans = sentence_pair_spans(corpus, SEQUENCE_LENGTH, **kwargs)
    assert spans.segment_a.shape == spans.segment_b.shape == (len(pairs.segment_a), 2)
    assert spans.segment_a.dtype == spans.segment_b.dtype == np.int64
    for segments, offsets in [(pairs.segment_a, spans.segment_a), (pairs.segment_b, spans.segment_b)]:
        for segment, (start, end) in zip(segments, offsets):
            np.testing.assert_array_equal(segment, corpus.token_ids[start:end])
    np.testing.assert_array_equal(spans.next_sentence_label, pairs.next_sentence_label)
    np.testing.assert_array_equal(spans.document_index, pairs.document_index)


def test_integer_draws_are_uniform(corpus):
    """The pair generator's integers (one float draw each) cover [low, high) uniformly."""
    generator = _PairGenerator(corpus, SEQUENCE_LENGTH, 0.1, np.random.default_rng(0))
    draws = np.array([generator.integer(3, 8) for _ in range(50_000)])
    assert draws.min() == 3 and draws.max() == 7
    np.testing.assert_allclose(np.bincount(draws)[3:] / len(draws), 0.2, atol=0.01)
    assert {generator.integer(5, 6) for _ in range(100)} == {5}
