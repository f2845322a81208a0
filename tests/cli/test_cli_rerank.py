"""`kzoo rerank` and `kzoo search --rerank`, run through the command's entry point (in this
process: `cli_fixtures.run_here`) against `BertReranker.rank` / `predict_scores` and
`BertTextEmbedder.search` on the same saved presets; their bad arguments refused in kzoo's words."""

import csv
import io
import json

import numpy as np
import pytest

import kzoo
from tests.cli.cli_fixtures import VOCABULARY, expect_error, run_here, tiny_backbone, write_csv

pytestmark = pytest.mark.backend_independent  # the command's code; the reranker is tested on every backend

DOCUMENTS = ["a good film", "a very bad film", "the plot is good", "bad plot", "a very very good film .", "film"]
QUERIES = ["good film", "bad plot ."]


@pytest.fixture(scope="module")
def presets(tmp_path_factory):
    """A tiny reranker (random weights, saved as a trained one: kzoo and Hugging Face) and
    embedder, each saved as a preset directory, with the models."""
    root = tmp_path_factory.mktemp("rerank")
    preprocessor = kzoo.BertPreprocessor(kzoo.BertTokenizer(VOCABULARY), 16)
    reranker = kzoo.BertReranker(tiny_backbone(), preprocessor=preprocessor, activation="linear")
    reranker.save_to_preset(root / "reranker")
    reranker.save_to_preset(root / "reranker_hf", format="huggingface")
    embedder = kzoo.BertTextEmbedder(tiny_backbone(), preprocessor=preprocessor)
    embedder.save_to_preset(root / "embedder")
    write_csv(root / "documents.csv", [(text, str(i)) for i, text in enumerate(DOCUMENTS)], header=("doc", "id"))
    return root, reranker, embedder


def table(result):
    assert result.returncode == 0, result.stderr[-4000:]
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert rows and list(rows[0]) == ["query", "rank", "score", "text", "row"]
    return rows


def test_rerank_one_query_equals_rank(presets):
    root, reranker, _ = presets
    for model in ("reranker", "reranker_hf"):  # kzoo's preset, and the CrossEncoder directory it exports
        rows = table(run_here("rerank", root / model, "--documents", root / "documents.csv", "--column", "doc",
                              "--query", QUERIES[0]))
        scores, indices = reranker.rank(QUERIES[0], DOCUMENTS)  # every document, best first
        assert [int(row["row"]) for row in rows] == indices.tolist() and len(set(scores.tolist())) == 6
        assert [int(row["rank"]) for row in rows] == [1, 2, 3, 4, 5, 6]
        assert [row["text"] for row in rows] == [DOCUMENTS[i] for i in indices]
        np.testing.assert_allclose([float(row["score"]) for row in rows], scores, atol=1e-5)


def test_rerank_a_queries_file_to_json_lines_with_top_k(presets, tmp_path):
    root, reranker, _ = presets
    (tmp_path / "documents.txt").write_text("\n".join(DOCUMENTS) + "\n")
    result = run_here("rerank", root / "reranker", "--documents", tmp_path / "documents.txt", "--queries", "-",
                      "--top-k", "2", "--output-format", "jsonl", stdin="\n".join(QUERIES) + "\n")
    assert result.returncode == 0, result.stderr[-4000:]
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(line["query"], line["rank"]) for line in lines] == [(q, r) for q in QUERIES for r in (1, 2)]
    for i, query in enumerate(QUERIES):
        scores, indices = reranker.rank(query, DOCUMENTS, top_k=2)
        assert [line["row"] for line in lines[2 * i: 2 * i + 2]] == indices.tolist()
        np.testing.assert_allclose([line["score"] for line in lines[2 * i: 2 * i + 2]], scores, atol=1e-5)


def test_search_rerank_reorders_the_embedders_top_results(presets):
    root, reranker, embedder = presets
    rows = table(run_here("search", root / "embedder", "--corpus", root / "documents.csv", "--column", "doc",
                          "--top-k", "2", "--rerank", root / "reranker", "--rerank-top-k", "4",
                          stdin="\n".join(QUERIES) + "\n"))
    _, found = embedder.search(QUERIES, DOCUMENTS, top_k=4)  # the embedder's 4, then the reranker's best 2
    for i, query in enumerate(QUERIES):
        scores = reranker.predict_scores(([query] * 4, [DOCUMENTS[j] for j in found[i]]))
        best = np.argsort(-scores, kind="stable")[:2]
        assert [int(row["row"]) for row in rows[2 * i: 2 * i + 2]] == found[i][best].tolist()
        np.testing.assert_allclose([float(row["score"]) for row in rows[2 * i: 2 * i + 2]], scores[best], atol=1e-5)


def test_search_rerank_weight_interpolates_with_the_embedders_scores(presets):
    root, reranker, embedder = presets
    rows = table(run_here("search", root / "embedder", "--corpus", root / "documents.csv", "--column", "doc",
                          "--top-k", "3", "--rerank", root / "reranker", "--rerank-top-k", "5", "--rerank-weight",
                          "0.4", stdin="\n".join(QUERIES) + "\n"))
    cosines, found = embedder.search(QUERIES, DOCUMENTS, top_k=5)
    scores, indices = reranker.rerank(QUERIES, DOCUMENTS, found, top_k=3, candidate_scores=cosines, weight=0.4)
    assert [int(row["row"]) for row in rows] == indices.ravel().tolist()
    # The random reranker's logits differ by about 1e-5 around -0.0027: standardised, float32's rounding of
    # them (the command's compiled predict against this one) grows to about 1e-4.
    np.testing.assert_allclose([float(row["score"]) for row in rows], scores.ravel(), atol=1e-3)
    alone = reranker.rerank(QUERIES, DOCUMENTS, found, top_k=3)[1]
    assert indices.tolist() != alone.tolist() != found[:, :3].tolist()  # neither stage's order alone


def test_bad_rerank_arguments_are_refused_in_kzoos_words(presets, tmp_path):
    root, _, _ = presets
    documents = ("--documents", root / "documents.csv", "--column", "doc")
    rerank = ("rerank", root / "reranker", *documents)
    expect_error(run_here(*rerank), "--query TEXT (one) or --queries FILE")
    expect_error(run_here(*rerank, "--query", "  "), "--query is empty")
    expect_error(run_here(*rerank, "--query", "film", "--top-k", "7"), "--top-k 7 is more than the 6 documents")
    expect_error(run_here(*rerank, "--query", "film", "--top-k", "0"), "--top-k must be at least 1")
    expect_error(run_here("rerank", root / "documents.csv", *documents, "--query", "film"), "is a file")
    expect_error(run_here("rerank", "bert_tiny", *documents, "--query", "film"), "is not a directory")
    expect_error(run_here("rerank", root / "embedder", *documents, "--query", "film"),
                 "holds no trained reranker")
    search = ("search", root / "embedder", "--corpus", root / "documents.csv", "--column", "doc", "--queries",
              root / "documents.csv", "--query-column", "doc")
    expect_error(run_here(*search, "--rerank-top-k", "5"), "give --rerank MODEL too")
    expect_error(run_here(*search, "--rerank-weight", "0.5"), "--rerank-weight says how", "give --rerank MODEL too")
    expect_error(run_here(*search, "--rerank", root / "reranker", "--top-k", "2", "--rerank-weight", "1.5"),
                 "--rerank-weight is the reranker's share", "got 1.5")
    expect_error(run_here(*search, "--rerank", root / "reranker", "--rerank-top-k", "5"),
                 "--rerank-top-k 5 is less than --top-k 10")
    expect_error(run_here(*search, "--rerank", tmp_path / "missing"), "--rerank", "is not a directory")
