"""examples/semantic_search.py's reranking stage: the labelled pairs it trains the reranker on,
and the arguments it refuses before any work."""

import os
import sys

import pytest

_EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
sys.path.insert(0, _EXAMPLES)  # it imports example_runs and offline_corpora by name, as it runs
try:
    import semantic_search
finally:
    sys.path.remove(_EXAMPLES)


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
    (["--rerank-weight", "1.2"], "--rerank-weight in [0, 1]"),
])
def test_bad_rerank_arguments_stop_before_any_work(arguments, message, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["semantic_search.py", *arguments])
    with pytest.raises(SystemExit) as exit_info:
        semantic_search.parse_args()
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err

