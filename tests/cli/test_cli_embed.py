"""`kzoo embed` and `kzoo search`, run through the command's entry point (in
this process: `cli_fixtures.run_here`) against `BertTextEmbedder.encode` and
`search` on the same saved preset. Bad arguments and files (refused before
kzoo loads) are in test_cli_bad_input.py."""

import csv
import io
import json

import numpy as np
import pytest

import kzoo
from tests.cli.cli_fixtures import VOCABULARY, expect_error, run_here, tiny_backbone, write_csv, write_jsonl

pytestmark = pytest.mark.backend_independent  # the command's code; the embedder is tested on every backend

CORPUS = ["a good film", "a very bad film", "the plot is good", "bad plot", "a very very good film .", "film"]
QUERIES = ["good film", "bad plot ."]


@pytest.fixture(scope="module")
def preset(tmp_path_factory):
    """A tiny embedder (random weights) saved as a preset directory, and the model."""
    path = tmp_path_factory.mktemp("embedder") / "preset"
    model = kzoo.BertTextEmbedder(tiny_backbone(), preprocessor=kzoo.BertPreprocessor(kzoo.BertTokenizer(VOCABULARY),
                                                                                       16))
    model.save_to_preset(path)
    return path, model


def test_embed_a_table_column_to_npy(preset, tmp_path):
    path, model = preset
    rows = [(str(i), text) for i, text in enumerate(CORPUS)]
    write_csv(tmp_path / "reviews.csv", rows, header=("id", "review"))
    result = run_here("embed", path, "--input", tmp_path / "reviews.csv", "--column", "review",
                      "--output", tmp_path / "vectors.npy", "--batch-size", "4")
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout == ""
    assert "Wrote 6 embeddings of dimension 32 to" in result.stderr
    vectors = np.load(tmp_path / "vectors.npy")
    assert vectors.dtype == np.float32 and vectors.shape == (6, 32)
    np.testing.assert_allclose(vectors, model.encode(CORPUS, verbose=0), atol=1e-6, rtol=0)  # input order


def test_embed_standard_input_to_json_lines_on_standard_output(preset):
    path, model = preset
    result = run_here("embed", path, "--output", "-", stdin="\n".join(QUERIES) + "\n\n")
    assert result.returncode == 0, result.stderr[-4000:]
    lines = [json.loads(line) for line in result.stdout.splitlines()]  # nothing else on stdout
    assert [sorted(line) for line in lines] == [["embedding", "text"]] * 2
    assert [line["text"] for line in lines] == QUERIES
    vectors = np.array([line["embedding"] for line in lines])
    np.testing.assert_array_equal(vectors.astype("float32").astype("float64"), vectors)  # float32s, exactly
    np.testing.assert_allclose(vectors, model.encode(QUERIES, verbose=0), atol=1e-6, rtol=0)


def test_embed_json_lines_keeps_the_other_fields(preset, tmp_path):
    path, model = preset
    write_jsonl(tmp_path / "in.jsonl", [{"id": 7, "text": "good plot"}, {"id": 8, "text": "a bad film"}])
    result = run_here("embed", path, "--input", tmp_path / "in.jsonl", "--output", tmp_path / "out.jsonl")
    assert result.returncode == 0, result.stderr[-4000:]
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [(line["id"], line["text"]) for line in lines] == [(7, "good plot"), (8, "a bad film")]
    np.testing.assert_allclose([line["embedding"] for line in lines],
                               model.encode(["good plot", "a bad film"], verbose=0), atol=1e-6)


def test_search_matches_the_python_api(preset, tmp_path):
    path, model = preset
    write_csv(tmp_path / "corpus.csv", [(text, "x") for text in CORPUS], header=("sentence", "label"))
    result = run_here("search", path, "--corpus", tmp_path / "corpus.csv", "--column", "sentence",
                      "--top-k", "3", stdin="\n".join(QUERIES) + "\n")
    assert result.returncode == 0, result.stderr[-4000:]
    table = list(csv.DictReader(io.StringIO(result.stdout)))
    assert list(table[0]) == ["query", "rank", "score", "text", "row"]
    scores, indices = model.search(QUERIES, CORPUS, top_k=3)
    assert [row["query"] for row in table] == [q for q in QUERIES for _ in range(3)]
    assert [int(row["rank"]) for row in table] == [1, 2, 3] * 2
    assert [int(row["row"]) for row in table] == indices.ravel().tolist()
    assert [row["text"] for row in table] == [CORPUS[i] for i in indices.ravel()]
    np.testing.assert_allclose([float(row["score"]) for row in table], scores.ravel(), atol=1e-5)


def test_search_json_lines_and_a_top_k_beyond_the_corpus(preset, tmp_path):
    path, _ = preset
    (tmp_path / "corpus.txt").write_text("\n".join(CORPUS[:4]) + "\n")
    write_jsonl(tmp_path / "queries.jsonl", [{"q": query} for query in QUERIES])
    result = run_here("search", path, "--corpus", tmp_path / "corpus.txt", "--queries", tmp_path / "queries.jsonl",
                      "--query-column", "q", "--output", tmp_path / "results.jsonl")
    assert result.returncode == 0, result.stderr[-4000:]
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * 4  # top-k 10 of a corpus of 4: all of it, best first
    assert sorted(row["row"] for row in rows[:4]) == [0, 1, 2, 3]
    assert all(a["score"] >= b["score"] for a, b in zip(rows[:3], rows[1:4]))


def test_search_reads_the_corpus_vectors_that_embed_wrote(preset, tmp_path):
    path, _ = preset
    (tmp_path / "corpus.txt").write_text("\n".join(CORPUS) + "\n")
    (tmp_path / "queries.txt").write_text("\n".join(QUERIES) + "\n")
    embedded = run_here("embed", path, "--input", tmp_path / "corpus.txt", "--output", tmp_path / "corpus.npy")
    assert embedded.returncode == 0, embedded.stderr[-4000:]
    search = ("search", path, "--corpus", tmp_path / "corpus.txt", "--queries", tmp_path / "queries.txt")
    fresh, saved = run_here(*search), run_here(*search, "--corpus-embeddings", tmp_path / "corpus.npy")
    assert saved.returncode == 0, saved.stderr[-4000:]
    assert saved.stdout == fresh.stdout and saved.stdout.count("\n") == 1 + 2 * len(CORPUS)
    # Vectors of other texts (rows out of order) or of another shape are refused, not searched.
    vectors = np.load(tmp_path / "corpus.npy")
    for name, wrong in (("shuffled", vectors[::-1]), ("short", vectors[:3]), ("flat", vectors.ravel())):
        np.save(tmp_path / f"{name}.npy", wrong)
        expect_error(run_here(*search, "--corpus-embeddings", tmp_path / f"{name}.npy"),
                     f"--corpus-embeddings '{tmp_path / name}.npy'", "kzoo embed")


def test_a_preset_without_a_tokenizer_is_refused_in_kzoos_words(tmp_path):
    tiny_backbone().save_to_preset(tmp_path / "backbone")
    (tmp_path / "texts.txt").write_text("good film\n")
    expect_error(run_here("embed", tmp_path / "backbone", "--input", tmp_path / "texts.txt", "--output",
                          tmp_path / "out.npy"), "preprocessor")
    assert not (tmp_path / "out.npy").exists()


@pytest.fixture(scope="module")
def prompted_preset(tmp_path_factory):
    """A tiny embedder with query and document prompts, saved as a preset directory, and the model."""
    path = tmp_path_factory.mktemp("prompted") / "preset"
    model = kzoo.BertTextEmbedder(tiny_backbone(), preprocessor=kzoo.BertTokenizer(VOCABULARY),
                                 prompts={"query": "good ", "document": "a very "})
    model.save_to_preset(path)
    return path, model


def test_embed_truncated_quantized_and_prompted_vectors(prompted_preset, tmp_path):
    path, model = prompted_preset
    (tmp_path / "corpus.txt").write_text("\n".join(CORPUS) + "\n")
    options = {"prompt_name": "query", "truncate_dim": 8, "precision": "int8"}
    result = run_here("embed", path, "--input", tmp_path / "corpus.txt", "--output", tmp_path / "codes.npy",
                      "--prompt-name", "query", "--truncate-dim", "8", "--precision", "int8")
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Wrote 6 embeddings of dimension 8 as int8 codes (8 columns) to" in result.stderr
    codes = np.load(tmp_path / "codes.npy")
    assert codes.dtype == np.int8 and codes.shape == (6, 8)
    np.testing.assert_array_equal(codes, model.encode(CORPUS, verbose=0, **options))
    result = run_here("embed", path, "--output", "-", "--precision", "ubinary", stdin="\n".join(CORPUS) + "\n")
    bits = [json.loads(line)["embedding"] for line in result.stdout.splitlines()]
    np.testing.assert_array_equal(bits, model.encode(CORPUS, verbose=0, precision="ubinary"))  # 4 bytes a text


@pytest.mark.parametrize("precision", ["float32", "binary"])
def test_search_truncated_and_quantized_matches_the_python_api(prompted_preset, tmp_path, precision):
    path, model = prompted_preset
    (tmp_path / "corpus.txt").write_text("\n".join(CORPUS) + "\n")
    result = run_here("search", path, "--corpus", tmp_path / "corpus.txt", "--top-k", "3", "--truncate-dim", "16",
                      "--precision", precision, stdin="\n".join(QUERIES) + "\n")
    assert result.returncode == 0, result.stderr[-4000:]
    table = list(csv.DictReader(io.StringIO(result.stdout)))
    scores, indices = model.search(QUERIES, CORPUS, top_k=3, truncate_dim=16, precision=precision)
    assert [int(row["row"]) for row in table] == indices.ravel().tolist()
    np.testing.assert_allclose([float(row["score"]) for row in table], scores.ravel(), atol=1e-5)


def test_embedding_options_are_refused_in_kzoos_words(prompted_preset, tmp_path):
    path, _ = prompted_preset
    (tmp_path / "texts.txt").write_text("good film\n")
    embed = ("embed", path, "--input", tmp_path / "texts.txt", "--output", tmp_path / "out.npy")
    expect_error(run_here(*embed, "--truncate-dim", "0"), "--truncate-dim")
    expect_error(run_here(*embed, "--truncate-dim", "64"), "--truncate-dim 64 is above", "width of 32")
    expect_error(run_here(*embed, "--prompt-name", "title"), "--prompt-name 'title'", "query, document")
    expect_error(run_here(*embed, "--precision", "int8"), "--precision int8", "at least 2 texts")
    expect_error(run_here("search", path, "--corpus", tmp_path / "texts.txt", "--precision", "uint8",
                          stdin="film\n"), "--precision uint8", "at least 2 texts")
    assert not (tmp_path / "out.npy").exists()
