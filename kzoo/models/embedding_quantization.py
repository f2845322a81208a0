"""Smaller sentence embeddings, on the host in NumPy: int8 / uint8 codes (one byte a
dimension, from per-dimension ranges of a calibration set) and binary codes (the sign of
each dimension, 8 to a byte), as sentence-transformers' `quantize_embeddings` (v6.2)
writes them; the scores a search ranks them by (the dot product of the codes, or the
Hamming distance), and the rescoring of the best candidates with the float query that
sentence-transformers' `semantic_search_faiss` / `semantic_search_usearch` do
(Shakir, Aarsen & Lee, 2024, "Binary and Scalar Embedding Quantization"; the two stages,
binary codes ranked by Hamming distance then rescored with the float query, are Yamada,
Asai & Hajishirzi, 2021, "Efficient Passage Retrieval with Hashing for Open-domain Question
Answering", sec. 3).
`kzoo.semantic_search(..., precision=...)` and `kzoo.BertTextEmbedder.encode(..., precision=...)`
use them.
"""

import numpy as np

PRECISIONS = ("float32", "int8", "uint8", "binary", "ubinary")
CODE_DTYPES = {"int8": np.int8, "uint8": np.uint8, "binary": np.int8, "ubinary": np.uint8}


def check_precision(precision):
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {list(PRECISIONS)}; got {precision!r}.")
    return precision


def quantization_ranges(calibration_embeddings):
    """The per-dimension `(2, dim)` ranges, minimum then maximum, that int8 / uint8 codes
    are cut from: those of a calibration set (sentence-transformers'
    `calibration_embeddings`). Quantize the corpus and the queries with the same ranges.

    Args:
        calibration_embeddings: float array `(n, dim)`, n >= 2. Embeddings like the ones
            to quantize (a sample of the corpus).

    Returns:
        float32 NumPy array `(2, dim)`.

    Example:

    >>> quantization_ranges([[0.0, 1.0], [2.0, -1.0]]).tolist()
    [[0.0, -1.0], [2.0, 1.0]]
    """
    calibration = _floats(calibration_embeddings, "calibration_embeddings")
    if len(calibration) < 2:
        raise ValueError(
            f"Quantization ranges need at least 2 calibration embeddings (a minimum and a maximum per "
            f"dimension); got {len(calibration)}. Pass embeddings of a sample of the corpus."
        )
    return np.stack([calibration.min(axis=0), calibration.max(axis=0)])


def quantize_embeddings(embeddings, precision, ranges=None, calibration_embeddings=None):
    """Float embeddings as int8, uint8, binary or ubinary codes, equal to
    sentence-transformers' `quantize_embeddings` (Shakir, Aarsen & Lee, 2024).

    int8 / uint8: each dimension's range (from `ranges`, else `calibration_embeddings`,
    else `embeddings` themselves) cut into 256 buckets, `floor((x - min) / step)` clipped
    to [0, 255] (minus 128 for int8). binary / ubinary: 1 where x > 0, packed 8 dimensions
    to a byte (`np.packbits`; minus 128 as int8 for binary), `(n, ceil(dim / 8))`.

    Args:
        embeddings: float array `(n, dim)`.
        precision: str. `"float32"`, `"int8"`, `"uint8"`, `"binary"` or `"ubinary"`.
        ranges: float array `(2, dim)` or None. From `kzoo.quantization_ranges`.
            Defaults to `None`.
        calibration_embeddings: float array `(m, dim)` or None. Used for the ranges when
            `ranges` is None. Defaults to `None`.

    Returns:
        NumPy array: float32 `(n, dim)`, int8 / uint8 `(n, dim)`, or int8 / uint8
        `(n, ceil(dim / 8))`.

    Example:

    >>> vectors = [[0.5, -0.2, 0.1], [-0.5, 0.2, 0.3]]
    >>> quantize_embeddings(vectors, "ubinary").tolist()
    [[160], [96]]
    >>> quantize_embeddings(vectors, "int8").tolist()  # float32 steps: 0.5 lands just below the top
    [[126, -128, -128], [-128, 127, 127]]
    """
    check_precision(precision)
    embeddings = _floats(embeddings, "embeddings")
    if precision == "float32":
        return embeddings
    if precision.endswith("binary"):
        packed = np.packbits(embeddings > 0, axis=-1)
        return (packed - 128).astype(np.int8) if precision == "binary" else packed
    if ranges is None and calibration_embeddings is not None:
        calibration = _floats(calibration_embeddings, "calibration_embeddings")
        if calibration.shape[1] != embeddings.shape[1]:
            raise ValueError(f"calibration_embeddings have {calibration.shape[1]} dimensions and the embeddings "
                             f"{embeddings.shape[1]}: calibrate with embeddings of the same model, truncated alike.")
    if ranges is None:
        ranges = quantization_ranges(embeddings if calibration_embeddings is None else calibration_embeddings)
    starts, steps = _buckets(ranges, embeddings.shape[1])
    codes = np.clip(np.floor((embeddings - starts) / steps), 0, 255)
    return (codes - 128).astype(np.int8) if precision == "int8" else codes.astype(np.uint8)


def dequantize(codes, precision, ranges):
    """int8 / uint8 codes back at the left edge of their bucket, float64 `(n, dim)`, as
    sentence-transformers' rescoring reads them; binary codes as their bits, 0 or 1.

    Example:

    >>> dequantize(np.array([[-128, 127]], np.int8), "int8", np.array([[0.0, 0.0], [1.0, 2.0]])).round(6).tolist()
    [[0.0, 2.0]]
    """
    if precision.endswith("binary"):
        return np.unpackbits(codes.view(np.uint8) ^ (0x80 if precision == "binary" else 0), axis=-1)
    starts, steps = _buckets(ranges, codes.shape[-1])
    return (codes.astype(np.float64) + (128 if precision == "int8" else 0)) * steps + starts


def code_scores(queries, corpus, precision):
    """Scores of query codes against corpus codes `(q, n)`, larger is closer: the dot
    product of int8 / uint8 codes (exact), the negative Hamming distance of
    binary codes (as usearch's `hamming` and faiss' binary indexes rank them).

    Example:

    >>> code_scores(np.array([[0b11110000]], np.uint8), np.array([[0b11110000], [0b00000011]], np.uint8),
    ...             "ubinary").tolist()
    [[0.0, -6.0]]
    """
    # float32 products and sums are exact while each score stays below 2**24: twice float64's speed.
    if not precision.endswith("binary"):
        largest = 128 if precision == "int8" else 255
        dtype = np.float32 if largest * largest * queries.shape[1] < 2**24 else np.float64
        return queries.astype(dtype) @ corpus.astype(dtype).T
    q, c = (dequantize(codes, precision, None).astype(np.float32) for codes in (queries, corpus))
    # |q XOR c| = |q| + |c| - 2 q.c for 0/1 vectors: one matrix product instead of q x n XORs.
    return 2 * (q @ c.T) - q.sum(axis=1, keepdims=True) - c.sum(axis=1)


def rescored(queries, corpus_codes, indices, precision, ranges, top_k):
    """The candidates `indices` `(q, k)` of float `queries` rescored as sentence-transformers
    does: query . dequantized corpus code (binary: query . bits), the best `top_k` first.

    Example:

    >>> codes = np.array([[-128, 127], [127, -128]], np.int8)
    >>> scores, indices = rescored(np.array([[1.0, 0.0]]), codes, np.array([[0, 1]]), "int8",
    ...                            np.array([[0.0, 0.0], [1.0, 1.0]]), 1)
    >>> indices.tolist(), scores.round(6).tolist()
    ([[1]], [[1.0]])
    """
    dimension = queries.shape[1]
    candidates = dequantize(corpus_codes[indices], precision, ranges)[..., :dimension]  # (q, k, dim)
    scores = np.einsum("ij,ikj->ik", queries.astype(np.float64), candidates)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :top_k]
    return np.take_along_axis(scores, order, axis=1), np.take_along_axis(indices, order, axis=1)


def check_codes(corpus, precision, dimension=None):
    """`corpus` as codes of `precision`, refused in kzoo's words when it is not."""
    corpus = np.asarray(corpus)
    dtype = CODE_DTYPES[precision]
    if corpus.ndim != 2 or corpus.dtype != dtype:
        raise ValueError(
            f"A {precision} corpus is the {np.dtype(dtype).name} codes of quantize_embeddings(corpus, "
            f"{precision!r}) (or encode(..., precision={precision!r})), a 2-D array; got a {corpus.dtype} "
            f"array of shape {corpus.shape}."
        )
    width = None if dimension is None else (-(-dimension // 8) if precision.endswith("binary") else dimension)
    if width is not None and corpus.shape[1] != width:
        raise ValueError(
            f"The {precision} corpus has {corpus.shape[1]} columns; queries of dimension {dimension} need "
            f"{width}: were they embedded by the same model (and truncated alike)?"
        )
    return corpus


def _buckets(ranges, dimension):
    ranges = np.asarray(ranges, np.float32)
    if ranges.shape != (2, dimension):
        raise ValueError(
            f"ranges must be (2, {dimension}): each dimension's minimum and maximum "
            f"(kzoo.quantization_ranges); got shape {ranges.shape}."
        )
    steps = (ranges[1] - ranges[0]) / 255
    return ranges[0], np.where(steps == 0, 1, steps)


def _floats(embeddings, name):
    array = np.asarray(embeddings)
    if array.ndim != 2 or array.dtype.kind not in "fiu" or array.dtype in (np.int8, np.uint8):
        raise ValueError(
            f"{name} must be float embeddings, a 2-D array (texts, dim); got a {array.dtype} array of "
            f"shape {array.shape}."
        )
    return array.astype(np.float32)
