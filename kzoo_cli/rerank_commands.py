"""The `kzoo` commands of cross-encoder reranking (BERT sec. 4.1 with one output; Nogueira &
Cho 2019): `kzoo rerank` (documents ordered by a `kzoo.BertReranker`'s score for each query)
and `kzoo search --rerank MODEL` (the embedder's top `--rerank-top-k`, reordered, by the reranker
alone or with `--rerank-weight W` by its score interpolated with the embedder's). MODEL is a
trained reranker: a preset directory saved by `BertReranker.save_to_preset`, or a
sentence-transformers `CrossEncoder` directory (a Hugging Face `BertForSequenceClassification`
with one label). Arguments and files are checked before kzoo is imported."""

import contextlib
import json
import os
import sys

from kzoo_cli.embed_commands import JSON_LINES_EXTENSIONS, SEARCH_COLUMNS, _texts
from kzoo_cli.quiet import import_kzoo
from kzoo_cli.tables import CommandError, check_writable, file_format, read_table, write_table
from kzoo_cli.use_commands import positive

DEFAULT_RERANK_TOP_K = 50  # the embedder's results reranked per query (sentence-transformers' retrieve & rerank)


def rerank(args):
    """`kzoo rerank MODEL --documents FILE (--query TEXT | --queries FILE)`: every document
    scored with each query by the reranker, the `--top-k` best (all by default) written best
    first as rows `query, rank (1 = best), score, text, row (the document's row, 0-based)`,
    as `kzoo search` writes them."""
    if (args.query is None) == (args.queries is None):
        raise CommandError("give the queries as --query TEXT (one) or --queries FILE (a query a line, or a column), "
                           "not both and not neither.")
    if args.query is not None and not args.query.strip():
        raise CommandError("--query is empty: give the text to rank the documents for.")
    if args.documents == "-" and args.queries == "-":
        raise CommandError("--documents and --queries cannot both be standard input (-): give at least one as a file.")
    documents_format = file_format(args.documents)
    query_format = None if args.queries is None else file_format(args.queries)
    check_reranker(args.model)
    positive("--batch-size", args.batch_size)
    output_format = _output_format(args)
    documents = _texts(args.documents, documents_format, *read_table(args.documents, documents_format), args.column,
                       "--column")
    top_k = len(documents) if args.top_k is None else args.top_k
    positive("--top-k", top_k)
    if top_k > len(documents):
        raise CommandError(f"--top-k {top_k} is more than the {len(documents):,} documents of {args.documents!r}: "
                           f"give at most {len(documents):,}, or leave it out to rank them all.")
    queries = [args.query] if args.queries is None else _texts(
        args.queries, query_format, *read_table(args.queries, query_format), args.query_column, "--query-column")
    import numpy as np  # noqa: PLC0415

    candidates = np.tile(np.arange(len(documents)), (len(queries), 1))
    scores, indices = reranked(load_reranker(args.model), queries, documents, candidates, top_k, args.batch_size)
    write_table(args.output, output_format, result_rows(queries, documents, scores, indices), SEARCH_COLUMNS)
    return 0


def check_search_options(args):
    """`kzoo search`'s `--rerank MODEL` and `--rerank-top-k K`, checked before kzoo loads:
    the number of the embedder's results per query to rerank (at least `--top-k`), else None."""
    if args.rerank is None:
        for option, value in (("--rerank-top-k", args.rerank_top_k), ("--rerank-weight", args.rerank_weight)):
            if value is not None:
                raise CommandError(f"{option} says how --rerank MODEL reorders the embedder's results: give "
                                   "--rerank MODEL too, or leave it out.")
        return None
    check_reranker(args.rerank, "--rerank")
    depth = DEFAULT_RERANK_TOP_K if args.rerank_top_k is None else args.rerank_top_k
    positive("--rerank-top-k", depth)
    if depth < args.top_k:
        raise CommandError(f"--rerank-top-k {depth} is less than --top-k {args.top_k}: the reranker reorders the "
                           "embedder's first --rerank-top-k results and keeps --top-k of them.")
    if args.rerank_weight is not None and not 0 <= args.rerank_weight <= 1:
        raise CommandError(f"--rerank-weight is the reranker's share of each result's score, from 0 (the embedder's "
                           f"order) to 1 (the reranker's); got {args.rerank_weight:g}.")
    return depth


def check_reranker(model, option="MODEL"):
    """A model that cannot be a trained reranker is refused before kzoo loads: a file, a
    missing directory, or a built-in name (none is a reranker: each would get a random head)."""
    if os.path.isfile(model):
        raise CommandError(f"{option} {model!r} is a file; a reranker is a directory: one saved by "
                           "BertReranker.save_to_preset, or a sentence-transformers CrossEncoder directory.")
    if not os.path.isdir(model):
        raise CommandError(f"{option} {model!r} is not a directory. Give a trained reranker: a directory saved by "
                           "BertReranker.save_to_preset, or a sentence-transformers CrossEncoder directory (a "
                           "BertForSequenceClassification with one label); the built-in presets hold none.")


def load_reranker(model):
    """The `kzoo.BertReranker` in directory `model`, refused unless its head was trained: a kzoo
    preset holding a reranker, or a Hugging Face sequence classifier with one label."""
    kzoo = import_kzoo()  # after the arguments are checked: seconds
    trained = kzoo.presets.saved_task_config(model, kzoo.BertReranker) is not None
    config = os.path.join(model, "config.json")
    if not trained and kzoo.presets.detect_format(model) == "huggingface" and os.path.isfile(config):
        with open(config, encoding="utf-8") as file:
            hf = json.load(file)
        trained = "BertForSequenceClassification" in hf.get("architectures", []) and len(
            hf.get("id2label", {0: None})) == 1
    if not trained:
        raise CommandError(f"{model!r} holds no trained reranker (a kzoo BertReranker preset, or a CrossEncoder's "
                           "BertForSequenceClassification with one label), so its scores would be random. Train "
                           "one with BertReranker.fit and save_to_preset.")
    return kzoo.BertReranker.from_preset(model)


def reranked(reranker, queries, documents, candidates, top_k, batch_size, candidate_scores=None, weight=None):
    """`BertReranker.rerank`, its progress off standard output."""
    with contextlib.redirect_stdout(sys.stderr):  # progress must not mix with what goes to stdout
        return reranker.rerank(queries, documents, candidates, top_k, batch_size, candidate_scores, weight)


def result_rows(queries, texts, scores, indices):
    """`kzoo search`'s rows: per query, its results best first."""
    return [
        {"query": query, "rank": rank, "score": round(float(score), 6), "text": texts[index], "row": int(index)}
        for query, row_scores, row_indices in zip(queries, scores, indices)
        for rank, (score, index) in enumerate(zip(row_scores, row_indices), 1)
    ]


def _output_format(args):
    if args.output != "-":
        check_writable(args.output)
    return args.output_format or ("jsonl" if args.output.endswith(JSON_LINES_EXTENSIONS) else "csv")
