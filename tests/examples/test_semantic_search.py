"""examples/semantic_search.py's reranking stage: the labelled pairs it trains the reranker on,
the reciprocal-rank fusion of two orders, and the arguments it refuses before any work."""

import os
import sys

import numpy as np
import pytest

_EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
sys.path.insert(0, _EXAMPLES)  # it imports example_runs and offline_corpora by name, as it runs
try:
    import semantic_search
finally:
    sys.path.remove(_EXAMPLES)


@pytest.mark.backend_independent
def test_reciprocal_rank_fusion_sums_one_over_k_plus_rank():
    # 1/61 + 1/63 = 0.032266 beats 2/62 = 0.032258: first and third beat second twice; the tie of
    # documents 0 and 2 keeps the first ranking's order.
    assert semantic_search.reciprocal_rank_fusion([np.array([[0, 1, 2]]), np.array([[2, 1, 0]])]).tolist() == [
        [0, 2, 1]]
    fused = semantic_search.reciprocal_rank_fusion(
        [np.array([[0, 1, 2], [5, 6, 7]]), np.array([[1, 2, 0], [7, 6, 5]]), np.array([[1, 0, 2], [7, 5, 6]])])
    assert fused.tolist() == [[1, 0, 2], [7, 5, 6]]  # 1: 1/62 + 2/61; 0: 1/61 + 1/62 + 1/63
    # k sets how much a first place weighs against steady second places: document 1, second three
    # times, has 3/62 = 0.04839 against document 2's 1/61 + 2/63 = 0.04814 at k = 60, 1.5 against 1.67 at 0.
    orders = [np.array([[0, 1, 2]]), np.array([[2, 1, 0]]), np.array([[0, 1, 2]])]
    assert semantic_search.reciprocal_rank_fusion(orders).tolist() == [[0, 1, 2]]
    assert semantic_search.reciprocal_rank_fusion(orders, k=0).tolist() == [[0, 2, 1]]


def test_reranker_pairs_are_each_query_with_its_own_document_two_mined_and_one_random():
    from kzoo import BertBackbone, BertTextEmbedder, BertTokenizer  # noqa: PLC0415

    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat", "dog", "sat", "ran", "bird", "fish"]
    embedder = BertTextEmbedder(BertBackbone(vocabulary_size=len(vocabulary), num_layers=1, num_heads=2,
                                             hidden_dim=8, intermediate_dim=16), preprocessor=BertTokenizer(vocabulary))
    queries = ["a cat", "a dog", "a bird", "a fish", "cat ran"]
    documents = ["a cat sat", "a dog ran", "a bird sat", "a fish ran", "a cat ran"]
    (pair_queries, pair_documents), labels = semantic_search.reranker_pairs(embedder, queries, documents, 2, seed=0)
    assert len(pair_queries) == len(pair_documents) == len(labels) == 4 * len(queries)
    assert labels.tolist() == [1.0] * 5 + [0.0] * 15
    assert list(zip(pair_queries[:5], pair_documents[:5])) == list(zip(queries, documents))
    own = dict(zip(queries, documents))
    assert all(document != own[query] for query, document in zip(pair_queries[5:], pair_documents[5:]))
    assert sorted(pair_queries[5:15]) == sorted(queries * 2)  # two mined negatives per query
    assert pair_queries[15:] == queries  # and one random
    again = semantic_search.reranker_pairs(embedder, queries, documents, 2, seed=0)
    assert again[0] == (pair_queries, pair_documents)  # the random draw follows the seed


@pytest.mark.backend_independent
@pytest.mark.parametrize("arguments, message", [
    (["--rerank-top-k", "5"], "--rerank-top-k at least 10"),
    (["--rerank-epochs", "-1"], "--rerank-epochs must be 0 or more"),
])
def test_bad_rerank_arguments_stop_before_any_work(arguments, message, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["semantic_search.py", *arguments])
    with pytest.raises(SystemExit) as exit_info:
        semantic_search.parse_args()
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.backend_independent
def test_the_reranking_stage_is_asked_for(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["semantic_search.py"])
    assert semantic_search.parse_args().rerank_epochs == 0  # off by default: it does not help yet
    monkeypatch.setattr(sys, "argv", ["semantic_search.py", "--rerank-epochs", "2"])
    assert semantic_search.parse_args().rerank_epochs == 2
