"""int8 / binary embeddings (`kzoo.quantize_embeddings`) equal to sentence-transformers'
`quantize_embeddings`, and `kzoo.semantic_search` over them equal to a brute-force search
of the same codes, with and without rescoring by the float queries."""

import numpy as np
import pytest

import kzoo
from kzoo.models.embedding_quantization import dequantize

pytestmark = pytest.mark.backend_independent  # NumPy on the host: no backend runs it
RNG = np.random.default_rng(0)
DIM = 19  # not a multiple of 8: the packed bits' padding is exercised
CORPUS = RNG.normal(size=(300, DIM)).astype("float32")
QUERIES = RNG.normal(size=(7, DIM)).astype("float32")
CALIBRATION = RNG.normal(size=(50, DIM)).astype("float32")
QUANTIZED = ("int8", "uint8", "binary", "ubinary")


def test_codes_equal_sentence_transformers():
    quantization = pytest.importorskip("sentence_transformers.util.quantization")
    ranges = kzoo.quantization_ranges(CALIBRATION)
    for precision in ("float32", *QUANTIZED):
        ours = kzoo.quantize_embeddings(CORPUS, precision, calibration_embeddings=CALIBRATION)
        theirs = quantization.quantize_embeddings(CORPUS, precision, calibration_embeddings=CALIBRATION)
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, precision
        np.testing.assert_array_equal(ours, theirs)
        np.testing.assert_array_equal(kzoo.quantize_embeddings(CORPUS, precision, ranges=ranges), theirs)
        np.testing.assert_array_equal(kzoo.quantize_embeddings(CORPUS, precision),
                                      quantization.quantize_embeddings(CORPUS, precision))
    assert kzoo.quantize_embeddings(CORPUS, "binary").shape == (300, 3)
    # Dequantized int8 codes sit at the left edge of their bucket: within one step of the value.
    step = (ranges[1] - ranges[0]) / 255
    restored = dequantize(kzoo.quantize_embeddings(CALIBRATION, "int8", ranges), "int8", ranges)
    assert np.all((CALIBRATION - restored >= -1e-5) & (CALIBRATION - restored <= step + 1e-5))


def _brute_force(queries, corpus, precision, ranges, top_k, rescore):
    """Every score of the quantized queries against the codes, sorted whole (equal scores by row)."""
    q_codes = kzoo.quantize_embeddings(queries, precision, ranges)
    if precision.endswith("binary"):
        bits = [np.unpackbits(c.view(np.uint8), axis=1) for c in (q_codes, corpus)]
        scores = -(bits[0][:, None, :] != bits[1][None, :, :]).sum(-1).astype(float)  # minus Hamming
    else:
        scores = q_codes.astype(np.int64) @ corpus.astype(np.int64).T
    order = np.lexsort((np.broadcast_to(np.arange(len(corpus)), scores.shape), -scores), axis=1)
    candidates = order[:, : top_k * (2 if rescore else 1)]
    if not rescore:
        return np.take_along_axis(scores, candidates, axis=1), candidates
    full = dequantize(corpus, precision, ranges)[:, :DIM]
    rescored = np.stack([full[row] @ query.astype(np.float64) for row, query in zip(candidates, queries)])
    best = np.argsort(-rescored, axis=1, kind="stable")[:, :top_k]
    return np.take_along_axis(rescored, best, axis=1), np.take_along_axis(candidates, best, axis=1)


@pytest.mark.parametrize("precision", QUANTIZED)
def test_search_over_codes_equals_brute_force(precision):
    ranges = kzoo.quantization_ranges(CALIBRATION)
    corpus = kzoo.quantize_embeddings(CORPUS, precision, ranges)
    for rescore in (False, True):
        scores, indices = kzoo.semantic_search(QUERIES, corpus, top_k=10, query_chunk=3, corpus_chunk=64,
                                               precision=precision, ranges=ranges, rescore=rescore)
        expected_scores, expected_indices = _brute_force(QUERIES, corpus, precision, ranges, 10, rescore)
        np.testing.assert_array_equal(indices, expected_indices)
        np.testing.assert_allclose(scores, expected_scores, rtol=1e-6, atol=1e-6)
    # Query codes search the same, never rescored.
    codes = kzoo.quantize_embeddings(QUERIES, precision, ranges)
    np.testing.assert_array_equal(kzoo.semantic_search(codes, corpus, top_k=10, precision=precision)[1],
                                  _brute_force(QUERIES, corpus, precision, ranges, 10, False)[1])


def test_rescoring_recovers_the_float_ranking():
    """Binary codes alone find fewer of the float search's top 10 than after rescoring 4x as many."""
    float_top = kzoo.semantic_search(QUERIES, CORPUS, top_k=10)[1]
    corpus = kzoo.quantize_embeddings(CORPUS, "ubinary")

    def recall(**options):
        found = kzoo.semantic_search(QUERIES, corpus, top_k=10, precision="ubinary", **options)[1]
        return np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found, float_top)])

    assert recall(rescore=False) < recall(rescore_multiplier=4)


def test_bad_input_is_refused_in_kzoos_words():
    ranges = kzoo.quantization_ranges(CALIBRATION)
    codes = kzoo.quantize_embeddings(CORPUS, "int8", ranges)
    with pytest.raises(ValueError, match="precision must be one of"):
        kzoo.quantize_embeddings(CORPUS, "int4")
    with pytest.raises(ValueError, match="needs the corpus' ranges"):
        kzoo.semantic_search(QUERIES, codes, precision="int8")
    with pytest.raises(ValueError, match="int8 corpus is the int8 codes"):
        kzoo.semantic_search(QUERIES, CORPUS, precision="int8", ranges=ranges)
    with pytest.raises(ValueError, match="has 19 columns; queries of dimension 18 need 18"):
        kzoo.semantic_search(QUERIES[:, :18], codes, precision="int8", ranges=ranges)
    with pytest.raises(ValueError, match=r"ranges must be \(2, 19\)"):
        kzoo.quantize_embeddings(CORPUS, "int8", ranges=ranges[:, :5])
    with pytest.raises(ValueError, match="at least 2 calibration embeddings"):
        kzoo.quantization_ranges(CORPUS[:1])
    with pytest.raises(ValueError, match="must be float embeddings"):
        kzoo.quantize_embeddings(codes, "int8")
    with pytest.raises(ValueError, match="calibration_embeddings have 5 dimensions and the embeddings 19"):
        kzoo.quantize_embeddings(CORPUS, "int8", calibration_embeddings=CALIBRATION[:, :5])
    for precision, corpus in (("float32", CORPUS[:0]), ("int8", codes[:0]), ("ubinary", np.zeros((0, 3), np.uint8))):
        with pytest.raises(ValueError, match=r"The corpus is empty \(shape \(0, \d+\)\): there is nothing to search"):
            kzoo.semantic_search(QUERIES, corpus, precision=precision, ranges=ranges)
    with pytest.raises(ValueError, match="Embeddings are a 2-D array"):
        kzoo.semantic_search(QUERIES[0], CORPUS)
    with pytest.raises(ValueError, match=r"takes embeddings, arrays of numbers; corpus is a <U\d+ array"):
        kzoo.semantic_search(QUERIES, ["a text", "another"])
    for name in ("query_chunk", "corpus_chunk", "rescore_multiplier"):  # 0 gave no results or a NumPy error
        with pytest.raises(ValueError, match=f"{name} must be a positive int; got 0"):
            kzoo.semantic_search(QUERIES, codes, precision="int8", ranges=ranges, **{name: 0})
