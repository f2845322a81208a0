"""Retrieval metrics on the host, in NumPy: MRR@k, NDCG@k, MAP@k, recall@k, precision@k and
accuracy@k as sentence-transformers' `InformationRetrievalEvaluator` (v6.2) defines them, on
rankings (`mrr_at_k`, ...), on a score matrix (`retrieval_metrics`) or on texts with an
embedder (`evaluate_retrieval`). Each is a mean over the queries with relevant documents.
The measures are those of Manning, Raghavan & Schütze, "Introduction to Information Retrieval"
(2008), sec. 8.4 (ranked retrieval: precision at k, MAP, NDCG), with MRR.

Binary relevance throughout (a document is relevant or not), as the evaluator:
- accuracy@k: 1 if a relevant document is among the first k, else 0;
- precision@k: relevant documents in the first k, over k (even where fewer than k were ranked);
- recall@k: relevant documents in the first k, over the query's relevant documents;
- MRR@k: 1 / the rank of the first relevant document within the first k, else 0;
- NDCG@k: sum of 1 / log2(rank + 1) over the relevant documents in the first k, over the same
  sum for an ideal ranking (min(k, relevant) relevant documents first) (Järvelin & Kekäläinen, 2002);
- MAP@k: sum of precision@rank over the ranks of relevant documents within the first k, over
  min(k, relevant).
"""

import itertools

import numpy as np

from kzoo.models.embeddings import cosine_similarity

DEFAULT_KS = {"accuracy_at_k": (1, 3, 5, 10), "precision_recall_at_k": (1, 3, 5, 10),
              "mrr_at_k": (10,), "ndcg_at_k": (10,), "map_at_k": (100,)}  # the evaluator's defaults


def _check_k(k, name="k"):
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"{name} must be a positive int (the number of ranked documents counted); got {k!r}.")
    return int(k)


def _hits(rankings, relevant, k):
    """`(hits (q, k) bool, relevant counts (q,))`: whether the document at each of the first k ranks is relevant."""
    k = _check_k(k)
    rankings = [list(row) for row in rankings]
    relevant = [set(documents) for documents in relevant]
    if len(rankings) != len(relevant):
        raise ValueError(
            f"rankings and relevant must have one row per query: got {len(rankings)} rankings and "
            f"{len(relevant)} sets of relevant documents."
        )
    if not rankings:
        raise ValueError("No queries to evaluate: rankings and relevant are empty.")
    empty = [i for i, documents in enumerate(relevant) if not documents]
    if empty:
        raise ValueError(
            f"Queries {empty[:5]} have no relevant document, so their metrics are undefined. Drop them "
            "(sentence-transformers' InformationRetrievalEvaluator skips such queries; so does "
            "kzoo.retrieval_metrics)."
        )
    hits = np.zeros((len(rankings), k), bool)
    for i, (row, documents) in enumerate(zip(rankings, relevant)):
        hits[i, : min(k, len(row))] = [document in documents for document in row[:k]]
    return hits, np.array([len(documents) for documents in relevant], "float64")


def accuracy_at_k(rankings, relevant, k=10):
    """The fraction of queries with a relevant document among their first `k` results (hit rate).

    Args:
        rankings: list of lists (or an int array `(queries, ranked)`). Each query's
            documents, best first (e.g. `indices` of `kzoo.semantic_search`).
        relevant: list of sets. Each query's relevant documents, in the same ids as `rankings`.
        k: int. The ranks counted. Defaults to `10`.

    Returns:
        float, in [0, 1].

    Example:

    >>> accuracy_at_k([[3, 1, 2], [0, 2, 1]], [{1}, {1}], k=2)
    0.5
    """
    return float(_hits(rankings, relevant, k)[0].any(axis=1).mean())


def precision_at_k(rankings, relevant, k=10):
    """The mean fraction of the first `k` results that are relevant (over `k`, as the evaluator,
    even where a query has fewer than `k` results).

    Args:
        rankings: list of lists (or an int array). Each query's documents, best first.
        relevant: list of sets. Each query's relevant documents.
        k: int. The ranks counted. Defaults to `10`.

    Returns:
        float, in [0, 1].

    Example:

    >>> precision_at_k([[3, 1, 2], [0, 2, 1]], [{1, 3}, {1}], k=2)
    0.5
    """
    hits, _ = _hits(rankings, relevant, k)
    return float((hits.sum(axis=1) / hits.shape[1]).mean())


def recall_at_k(rankings, relevant, k=10):
    """The mean fraction of each query's relevant documents found in its first `k` results.

    Args:
        rankings: list of lists (or an int array). Each query's documents, best first.
        relevant: list of sets. Each query's relevant documents.
        k: int. The ranks counted. Defaults to `10`.

    Returns:
        float, in [0, 1].

    Example:

    >>> recall_at_k([[3, 1, 2], [0, 2, 1]], [{1, 2}, {1}], k=2)
    0.25
    """
    hits, counts = _hits(rankings, relevant, k)
    return float((hits.sum(axis=1) / counts).mean())


def mrr_at_k(rankings, relevant, k=10):
    """Mean reciprocal rank: the mean of 1 / the rank of each query's first relevant result,
    0 where none is in the first `k`.

    Args:
        rankings: list of lists (or an int array). Each query's documents, best first.
        relevant: list of sets. Each query's relevant documents.
        k: int. The ranks counted. Defaults to `10`.

    Returns:
        float, in [0, 1].

    Example:

    >>> mrr_at_k([[3, 1, 2], [0, 2, 1]], [{1}, {5}], k=10)
    0.25
    """
    hits, _ = _hits(rankings, relevant, k)
    first = hits.argmax(axis=1)
    return float(np.where(hits.any(axis=1), 1.0 / (first + 1), 0.0).mean())


def ndcg_at_k(rankings, relevant, k=10):
    """Normalised discounted cumulative gain with binary gains (Järvelin & Kekäläinen, 2002):
    sum over relevant results at rank r <= `k` of 1 / log2(r + 1), over the ideal ranking's sum.

    Args:
        rankings: list of lists (or an int array). Each query's documents, best first.
        relevant: list of sets. Each query's relevant documents.
        k: int. The ranks counted. Defaults to `10`.

    Returns:
        float, in [0, 1].

    Example:

    >>> round(ndcg_at_k([[3, 1, 2]], [{1}], k=10), 4)  # 1/log2(3)
    0.6309
    """
    hits, counts = _hits(rankings, relevant, k)
    discounts = 1.0 / np.log2(np.arange(hits.shape[1]) + 2.0)
    ideal = np.cumsum(discounts)[np.minimum(counts, hits.shape[1]).astype(int) - 1]
    return float(((hits * discounts).sum(axis=1) / ideal).mean())


def map_at_k(rankings, relevant, k=100):
    """Mean average precision: for each query the sum of precision@r over the ranks r <= `k`
    of its relevant results, over min(`k`, its relevant documents); then the mean.

    Args:
        rankings: list of lists (or an int array). Each query's documents, best first.
        relevant: list of sets. Each query's relevant documents.
        k: int. The ranks counted. Defaults to `100`.

    Returns:
        float, in [0, 1].

    Example:

    >>> map_at_k([[3, 1, 2]], [{1, 2}], k=100)  # (1/2 + 2/3) / 2
    0.5833333333333333
    """
    hits, counts = _hits(rankings, relevant, k)
    precisions = np.cumsum(hits, axis=1) / np.arange(1, hits.shape[1] + 1)
    return float(((precisions * hits).sum(axis=1) / np.minimum(counts, hits.shape[1])).mean())


def rank_documents(scores, top_k, tie_order=None):
    """The `top_k` best documents of each query, by decreasing score, equal scores in
    `tie_order` (the evaluator's order: ascending corpus id).

    Args:
        scores: float array `(queries, documents)`.
        top_k: int. Documents kept per query (at most all).
        tie_order: int array `(documents,)` or None. Each document's place among equal
            scores, lowest first. Defaults to `None`: the column order.

    Returns:
        int64 array `(queries, min(top_k, documents))` of column indices.

    Example:

    >>> rank_documents([[0.1, 0.9, 0.9, 0.5]], top_k=3).tolist()
    [[1, 2, 3]]
    """
    scores = np.asarray(scores)
    if scores.ndim != 2 or scores.shape[1] == 0 or scores.dtype.kind != "f":
        raise ValueError(
            f"scores must be a float matrix (queries, documents) with at least one document; got "
            f"{scores.dtype} of shape {scores.shape}."
        )
    if np.isnan(scores).any():
        raise ValueError("scores hold NaN: a ranking of them is undefined. Check the model's outputs.")
    k = min(_check_k(top_k, "top_k"), scores.shape[1])
    tie_order = np.arange(scores.shape[1]) if tie_order is None else np.asarray(tie_order)
    keys = np.broadcast_to(tie_order, scores.shape)
    return np.lexsort((keys, -scores), axis=1)[:, :k].astype("int64")


def checked_ks(ks, owner="retrieval_metrics"):
    """`ks` (the k's by argument name) completed with the evaluator's defaults, each a tuple of positive ints.

    Example:

    >>> checked_ks({"mrr_at_k": [5]})["mrr_at_k"], checked_ks({})["map_at_k"]
    ((5,), (100,))
    """
    unknown = sorted(set(ks) - set(DEFAULT_KS))
    if unknown:
        raise ValueError(f"{owner}: unknown argument(s) {unknown}; the k's are given as {sorted(DEFAULT_KS)}.")
    ks = {name: tuple(_check_k(k, name) for k in ks.get(name, default)) for name, default in DEFAULT_KS.items()}
    if any(not values for values in ks.values()):
        raise ValueError(f"{owner}: each of {sorted(DEFAULT_KS)} needs at least one k; got {ks}.")
    return ks


def retrieval_metrics(scores, relevant, tie_order=None, **ks):
    """The evaluator's metrics from a score matrix: each query's documents ranked by score
    (`rank_documents`), then accuracy, precision and recall at `precision_recall_at_k`, MRR,
    NDCG and MAP at their k (Introduction to Information Retrieval, sec. 8.4). Queries with no
    relevant document are skipped, as the evaluator does.

    Args:
        scores: float array `(queries, documents)`, e.g. `kzoo.cosine_similarity` of embeddings
            or a reranker's scores.
        relevant: list of sets. The column indices of each query's relevant documents (one
            may lie outside the matrix: it is never found, and counts in recall's denominator).
        tie_order: int array `(documents,)` or None. As `rank_documents`. Defaults to `None`.
        **ks: tuples of ints, the evaluator's arguments: `accuracy_at_k` (defaults to
            `(1, 3, 5, 10)`), `precision_recall_at_k` (`(1, 3, 5, 10)`), `mrr_at_k` (`(10,)`),
            `ndcg_at_k` (`(10,)`), `map_at_k` (`(100,)`).

    Returns:
        dict: `"accuracy@1"`, ..., `"precision@1"`, `"recall@1"`, ..., `"mrr@10"`,
        `"ndcg@10"`, `"map@100"`: floats, the evaluator's `cosine_...` values for cosine scores.

    Example:

    >>> metrics = retrieval_metrics([[0.9, 0.1, 0.5], [0.2, 0.3, 0.8]], [{0}, {1}],
    ...                             accuracy_at_k=(1,), precision_recall_at_k=(2,), mrr_at_k=(3,))
    >>> {name: round(value, 4) for name, value in metrics.items()}  # doctest: +NORMALIZE_WHITESPACE
    {'accuracy@1': 0.5, 'precision@2': 0.5, 'recall@2': 1.0, 'mrr@3': 0.75, 'ndcg@10': 0.8155,
     'map@100': 0.75}
    """
    ks = checked_ks(ks)
    relevant = [set(documents) for documents in relevant]
    scores = np.asarray(scores)
    if scores.ndim != 2 or len(relevant) != scores.shape[0]:
        raise ValueError(
            f"relevant must hold one set per query (row of scores): got {len(relevant)} sets for scores "
            f"of shape {scores.shape}."
        )
    kept = [i for i, documents in enumerate(relevant) if documents]
    if not kept:
        raise ValueError("No query has a relevant document: there is nothing to evaluate.")
    rankings = rank_documents(scores[kept], max(max(values) for values in ks.values()), tie_order)
    relevant = [relevant[i] for i in kept]
    metrics = {}
    for name, function in (("accuracy", accuracy_at_k), ("precision", precision_at_k), ("recall", recall_at_k)):
        source = "accuracy_at_k" if name == "accuracy" else "precision_recall_at_k"
        metrics.update({f"{name}@{k}": function(rankings, relevant, k) for k in ks[source]})
    for name, function in (("mrr", mrr_at_k), ("ndcg", ndcg_at_k), ("map", map_at_k)):
        metrics.update({f"{name}@{k}": function(rankings, relevant, k) for k in ks[f"{name}_at_k"]})
    return metrics


def evaluate_retrieval(embedder, queries, corpus, relevant_docs, batch_size=32, **ks):
    """The evaluator's metrics for an embedder on its inputs: `queries` and `corpus` embedded
    (`embedder.encode_query` and `encode_document`, as the evaluator), scored by cosine
    similarity, ranked (equal scores by ascending corpus id, as the evaluator), then
    `retrieval_metrics` (Introduction to Information Retrieval, sec. 8.4; Sentence-BERT sec. 3
    for the embeddings).

    Args:
        embedder: `kzoo.BertTextEmbedder`. The model that embeds the texts (anything with
            `encode(texts, batch_size, verbose)`).
        queries: dict. Query id -> text.
        corpus: dict. Document id -> text.
        relevant_docs: dict. Query id -> set of relevant document ids (queries without one are
            skipped; ids not in `corpus` count as relevant documents never found).
        batch_size: int. Texts per batch when encoding. Defaults to `32`.
        **ks: the k's, as `retrieval_metrics`.

    Returns:
        dict of floats, as `retrieval_metrics`.

    Example:

    >>> from kzoo import BertBackbone, BertTextEmbedder, BertTokenizer
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat", "dog", "sat"]
    >>> embedder = BertTextEmbedder(BertBackbone(vocabulary_size=len(vocabulary), num_layers=1,
    ...     num_heads=2, hidden_dim=8, intermediate_dim=16), preprocessor=BertTokenizer(vocabulary))
    >>> metrics = evaluate_retrieval(embedder, {"q1": "a cat"}, {"d1": "a cat sat", "d2": "a dog"},
    ...                              {"q1": {"d1"}}, mrr_at_k=(2,))
    >>> metrics["recall@3"], 0.5 <= metrics["mrr@2"] <= 1.0
    (1.0, True)
    """
    query_ids, corpus_ids, relevant, tie_order = retrieval_inputs(queries, corpus, relevant_docs)
    ks = checked_ks(ks, "evaluate_retrieval")
    # The evaluator embeds with encode_query / encode_document (each with its prompt), where the model has them.
    encoders = [getattr(embedder, name, embedder.encode) for name in ("encode_query", "encode_document")]
    embedded = [encode([texts[i] for i in ids], batch_size=batch_size, verbose=0)
                for encode, (texts, ids) in zip(encoders, ((queries, query_ids), (corpus, corpus_ids)))]
    return retrieval_metrics(cosine_similarity(*embedded), relevant, tie_order, **ks)


def retrieval_inputs(queries, corpus, relevant_docs):
    """The evaluator's dicts checked and read as `(query ids, corpus ids, relevant column
    sets, tie order)`: the queries with a relevant document, in order; relevant ids not in
    the corpus as columns past its end (never ranked); ties by ascending corpus id.

    Example:

    >>> retrieval_inputs({"q1": "a", "q2": "b"}, {"d2": "x", "d1": "y"}, {"q1": {"d1", "d9"}})
    (['q1'], ['d2', 'd1'], [{1, 2}], array([1, 0]))
    """
    kinds = {"queries": "query id -> text", "corpus": "document id -> text",
             "relevant_docs": "query id -> set of document ids"}
    for name, value in (("queries", queries), ("corpus", corpus), ("relevant_docs", relevant_docs)):
        if not isinstance(value, dict):
            raise ValueError(
                f"{name} must be a dict, {kinds[name]} (as sentence-transformers' "
                f"InformationRetrievalEvaluator takes it); got {type(value).__name__}."
            )
    if not corpus:
        raise ValueError("The corpus is empty: there is nothing to retrieve.")
    strings = [qid for qid, documents in relevant_docs.items() if isinstance(documents, (str, bytes))]
    if strings:
        raise ValueError(
            f"relevant_docs[{strings[0]!r}] is a string; each query's relevant documents are a set of "
            f"document ids, e.g. {{{strings[0]!r}: {{{relevant_docs[strings[0]]!r}}}}}."
        )
    query_ids = [qid for qid in queries if relevant_docs.get(qid)]
    if not query_ids:
        raise ValueError("No query of `queries` has a relevant document in `relevant_docs`: nothing to evaluate.")
    corpus_ids = list(corpus)
    column = {cid: i for i, cid in enumerate(corpus_ids)}
    outside = itertools.count(len(corpus_ids))  # relevant ids not in the corpus: columns never ranked
    relevant = [{column[cid] if cid in column else next(outside) for cid in relevant_docs[qid]} for qid in query_ids]
    tie_order = np.empty(len(corpus_ids), "int64")
    tie_order[sorted(range(len(corpus_ids)), key=corpus_ids.__getitem__)] = np.arange(len(corpus_ids))
    return query_ids, corpus_ids, relevant, tie_order
