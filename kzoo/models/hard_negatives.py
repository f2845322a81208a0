"""Hard negatives mined with the embedder itself: for each (query, positive) pair, the
corpus texts the embedder ranks highest for the query that are not its positives, as
(anchor, positive, negative) triplets for `kzoo.BertTextEmbedder.fit` and
`kzoo.MultipleNegativesRankingLoss` (sentence-transformers' `mine_hard_negatives`,
v6.2, with `sampling_strategy="top"` and `output_format="triplet"`; Moreira et al., 2024,
"NV-Retriever", sec. 3, for the margins).
"""

import numpy as np

from kzoo.models.embeddings import semantic_search


def mine_hard_negatives(embedder, queries, positives, corpus=None, range_min=0, range_max=None,
                        absolute_margin=None, relative_margin=None, max_score=None, min_score=None,
                        num_negatives=3, batch_size=32):
    """(anchor, positive, negative) triplets with negatives the embedder finds close to the
    anchor, as sentence-transformers' `mine_hard_negatives` (top sampling, triplets).

    The corpus (`corpus` plus the positives, without duplicates) is embedded with
    `encode_document` and each distinct query with `encode_query`; for each query, the
    candidates are the corpus texts by decreasing cosine similarity, less its positives
    (a query may have several); candidates too close to the positive are dropped
    (`absolute_margin`: score > positive - margin; `relative_margin`: score > positive -
    |positive| · margin; the query's lowest positive score counts), and those above
    `max_score` or below `min_score`; of the first `range_max` left, the first `range_min`
    are skipped (likely unlabelled positives) and the next `num_negatives` kept. Each
    (query, positive) pair gives a triplet per negative, query by query in first-seen order.

    Args:
        embedder: `kzoo.BertTextEmbedder`. The model that embeds the texts.
        queries: list of str. The anchors, one per pair.
        positives: list of str. Each anchor's positive.
        corpus: list of str or None. Texts to mine from, besides the positives.
            Defaults to `None`: the positives only.
        range_min: int. Candidates skipped at the top. Defaults to `0`.
        range_max: int or None. Candidates considered. Defaults to `None`:
            `range_min + num_negatives + most positives of a query` (times 10 negatives
            with a margin or `max_score`), as sentence-transformers.
        absolute_margin: float or None. Defaults to `None`.
        relative_margin: float or None. Defaults to `None`.
        max_score: float or None. Defaults to `None`.
        min_score: float or None. Defaults to `None`.
        num_negatives: int. Negatives per pair, at most. Defaults to `3`.
        batch_size: int. Texts per batch when encoding. Defaults to `32`.

    Returns:
        `(anchors, positives, negatives)`: three lists of str of equal length, what
        `embedder.fit` takes.

    Example:

    >>> from kzoo import BertBackbone, BertTextEmbedder, BertTokenizer
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat", "dog", "sat", "ran"]
    >>> embedder = BertTextEmbedder(BertBackbone(vocabulary_size=len(vocabulary), num_layers=1,
    ...     num_heads=2, hidden_dim=8, intermediate_dim=16), preprocessor=BertTokenizer(vocabulary))
    >>> triplets = mine_hard_negatives(embedder, ["a cat", "a dog"], ["a cat sat", "a dog ran"],
    ...                                corpus=["a cat ran", "a dog sat"], num_negatives=1)
    >>> [len(column) for column in triplets]
    [2, 2, 2]
    >>> history = embedder.fit(triplets, epochs=1, verbose=0)
    """
    queries, positives, corpus = _checked(queries, positives, corpus, range_min, num_negatives)
    corpus = list(dict.fromkeys(corpus + positives))
    corpus_row = {text: i for i, text in enumerate(corpus)}
    unique = list(dict.fromkeys(queries))
    relevant = {query: [] for query in unique}
    for query, positive in zip(queries, positives):
        if corpus_row[positive] not in relevant[query]:
            relevant[query].append(corpus_row[positive])
    most_positives = max(len(rows) for rows in relevant.values())
    if len(corpus) <= min(len(rows) for rows in relevant.values()):
        raise ValueError(f"The texts to mine from (corpus and positives: {len(corpus)} distinct) are all positives of "
                         "the queries: there is no negative to find. Pass a corpus of other texts.")
    if range_max is None:
        filtered = absolute_margin is not None or relative_margin is not None or max_score is not None
        range_max = range_min + num_negatives * (10 if filtered else 1) + most_positives
    if range_min >= range_max or num_negatives > range_max - range_min:
        raise ValueError(f"Cannot mine {num_negatives} negatives per query from ranks {range_min} to {range_max}: "
                         "range_max must exceed range_min by at least num_negatives.")

    query_vectors = embedder.encode_query(unique, batch_size=batch_size, verbose=0)
    corpus_vectors = embedder.encode_document(corpus, batch_size=batch_size, verbose=0)
    scores, indices = semantic_search(query_vectors, corpus_vectors, top_k=range_max + most_positives)
    scores = scores.astype("float64")
    units = [v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12) for v in (query_vectors, corpus_vectors)]
    lowest_positive = np.array([min(units[0][q] @ units[1][r] for r in relevant[query])
                                for q, query in enumerate(unique)])[:, None]
    dropped = np.stack([np.isin(row, relevant[query]) for row, query in zip(indices, unique)])
    if absolute_margin is not None:
        dropped |= scores + absolute_margin > lowest_positive
    if relative_margin is not None:
        dropped |= scores > lowest_positive - np.abs(lowest_positive) * relative_margin
    if max_score is not None:
        dropped |= scores > max_score
    if min_score is not None:
        dropped |= scores < min_score
    anchors, kept_positives, negatives = [], [], []
    for q, query in enumerate(unique):
        kept = indices[q][~dropped[q]][:range_max][range_min: range_min + num_negatives]
        for positive in relevant[query]:
            anchors += [query] * len(kept)
            kept_positives += [corpus[positive]] * len(kept)
            negatives += [corpus[row] for row in kept]
    return anchors, kept_positives, negatives


def _checked(queries, positives, corpus, range_min, num_negatives):
    columns = {"queries": queries, "positives": positives, **({} if corpus is None else {"corpus": corpus})}
    for name, texts in columns.items():
        if not isinstance(texts, (list, tuple)) or not all(isinstance(text, str) for text in texts):
            raise ValueError(f"{name} must be a list of str; got {type(texts).__name__}.")
    if not queries or len(queries) != len(positives):
        raise ValueError(f"queries and positives are (query, positive) pairs: two non-empty lists of the same "
                         f"length; got {len(queries)} and {len(positives)}.")
    if corpus is not None and not corpus:
        raise ValueError("corpus is empty: there is nothing to mine negatives from. Pass the texts to mine, or "
                         "corpus=None to mine among the positives.")
    for name, value, least in (("range_min", range_min, 0), ("num_negatives", num_negatives, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an int of at least {least}; got {value!r}.")
    return list(queries), list(positives), list(corpus or [])
