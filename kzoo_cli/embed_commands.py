"""The `kzoo` commands of sentence embeddings (Sentence-BERT, Reimers &
Gurevych 2019): embed (texts to vectors) and search (the corpus texts
closest to each query). Both load a `kzoo.BertTextEmbedder` (a preset
directory, or a built-in name such as `all_minilm_l6_v2`); their arguments
and files are checked before kzoo is imported."""

import contextlib
import io
import os
import sys

from kzoo_cli.tables import CommandError, check_writable, column, file_format, read_table, write_bytes, write_table
from kzoo_cli.use_commands import positive
from kzoo_cli.quiet import import_kzoo

ARRAY_EXTENSIONS = (".npy",)
JSON_LINES_EXTENSIONS = (".jsonl", ".ndjson")
SEARCH_COLUMNS = ["query", "rank", "score", "text", "row"]


def embed(args):
    """`kzoo embed PRESET --input FILE --output OUT`: a vector per text, in
    input order: OUT.npy holds a float32 array `(texts, dim)`; OUT.jsonl (or
    `-`, standard output) each input row with its `embedding`. `--truncate-dim`,
    `--precision` and `--prompt-name` are `encode`'s `truncate_dim`, `precision`
    and `prompt_name` (the codes of int8 take their ranges from these texts)."""
    fmt = file_format(args.input, args.input_format)
    _check_preset(args.preset)
    positive("--batch-size", args.batch_size)
    _check_embedding_options(args)
    output_format = _embedding_format(args.output)
    columns, rows = read_table(args.input, fmt)
    texts = _texts(args.input, fmt, columns, rows, args.column, "--column")
    if args.precision.endswith("int8") and len(texts) < 2:
        raise CommandError(f"--precision {args.precision} takes each dimension's range from the texts embedded: "
                           "give at least 2 texts, or --precision float32.")
    import numpy as np  # noqa: PLC0415

    model = _load(args.preset)
    _check_model_options(model, args)
    embeddings = _encode(model, texts, args.batch_size, prompt_name=args.prompt_name,
                         truncate_dim=args.truncate_dim, precision=args.precision)
    if output_format == "npy":
        buffer = io.BytesIO()
        np.save(buffer, embeddings)
        write_bytes(args.output, buffer.getvalue())
    else:
        lines = [{**row, "embedding": vector.tolist()} for (_, row), vector in zip(rows, embeddings)]
        write_table(args.output, "jsonl", lines, [])
    if args.output != "-":
        codes = "" if args.precision == "float32" else f" as {args.precision} codes ({embeddings.shape[1]} columns)"
        dimension = args.truncate_dim or model.backbone.hidden_dim
        print(f"Wrote {len(texts):,} embeddings of dimension {dimension}{codes} to {args.output}.", file=sys.stderr)
    return 0


def search(args):
    """`kzoo search PRESET --corpus FILE --queries FILE`: for each query, the
    `--top-k` corpus texts of highest cosine similarity, best first, as rows
    `query, rank (1 = best), score, text, row (the corpus row, 0-based: the
    row of `kzoo embed`'s .npy)`. `--corpus-embeddings X.npy` reads that
    .npy instead of embedding the corpus on each search. Queries and corpus are
    embedded with the preset's query and document prompts (`encode_query`,
    `encode_document`); `--truncate-dim` and `--precision` are `search`'s.
    `--rerank MODEL` reorders each query's first `--rerank-top-k` (50) by a
    trained reranker and writes its scores; with `--rerank-weight W`, by W x its
    standardised logit + (1 - W) x the embedder's standardised score
    (`kzoo_cli.rerank_commands`)."""
    from kzoo_cli import rerank_commands  # noqa: PLC0415 (it imports this module)

    if args.corpus == "-" and args.queries == "-":
        raise CommandError("--corpus and --queries cannot both be standard input (-): give at least one as a file.")
    corpus_format, query_format = file_format(args.corpus), file_format(args.queries)
    _check_preset(args.preset)
    positive("--top-k", args.top_k)
    positive("--batch-size", args.batch_size)
    _check_embedding_options(args)
    depth = rerank_commands.check_search_options(args)
    output_format = args.output_format or ("jsonl" if args.output.endswith(JSON_LINES_EXTENSIONS) else "csv")
    if args.output != "-":
        check_writable(args.output)
    corpus = _texts(args.corpus, corpus_format, *read_table(args.corpus, corpus_format), args.column, "--column")
    queries = _texts(args.queries, query_format, *read_table(args.queries, query_format), args.query_column,
                     "--query-column")
    saved = None if args.corpus_embeddings is None else _saved_embeddings(args.corpus_embeddings, len(corpus))
    if args.precision.endswith("int8") and len(corpus) < 2:
        raise CommandError(f"--precision {args.precision} takes each dimension's range from the corpus: give a "
                           "corpus of at least 2 texts, or --precision float32.")
    model = _load(args.preset)
    _check_model_options(model, args)
    if saved is not None:
        _check_saved(model, saved, corpus, args)
    corpus_vectors = _encode(model, corpus, args.batch_size, "encode_document") if saved is None else saved
    query_vectors = _encode(model, queries, args.batch_size, "encode_query")
    scores, indices = model.search(query_vectors, corpus_vectors, top_k=depth or args.top_k,
                                   truncate_dim=args.truncate_dim, precision=args.precision)
    if depth is not None:
        reranker = rerank_commands.load_reranker(args.rerank)
        weight = args.rerank_weight
        scores, indices = rerank_commands.reranked(reranker, queries, corpus, indices, args.top_k, args.batch_size,
                                                   None if weight is None else scores, weight)
    write_table(args.output, output_format, rerank_commands.result_rows(queries, corpus, scores, indices),
                SEARCH_COLUMNS)
    return 0


def _saved_embeddings(path, rows):
    """`kzoo embed`'s array at `path`, refused unless it has a row per corpus text."""
    import numpy as np  # noqa: PLC0415

    if not path.lower().endswith(ARRAY_EXTENSIONS):
        raise CommandError(f"--corpus-embeddings {path!r}: give the .npy file `kzoo embed` wrote for the corpus.")
    try:
        vectors = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise CommandError(f"--corpus-embeddings {path!r} cannot be read as a .npy array ({error}). Write it "
                           "with `kzoo embed PRESET --input CORPUS --output X.npy`.") from None
    if vectors.ndim != 2 or vectors.dtype.kind != "f" or len(vectors) != rows:
        raise CommandError(f"--corpus-embeddings {path!r} holds a {vectors.dtype} array of shape {vectors.shape}; "
                           f"the corpus has {rows:,} texts, so it needs a float array of {rows:,} rows. Write it "
                           "again with `kzoo embed` on this corpus.")
    return vectors


def _check_saved(model, saved, corpus, args):
    """Vectors of another model or corpus would give wrong answers without a sign: the first
    rows must be what the model gives (within 1e-3: other backends and batchings differ by ~1e-6)."""
    import numpy as np  # noqa: PLC0415

    head = corpus[:8]
    fresh = _encode(model, head, args.batch_size, "encode_document")
    if fresh.shape[1] != saved.shape[1] or not np.allclose(fresh, saved[: len(head)], atol=1e-3, rtol=0):
        raise CommandError(f"--corpus-embeddings {args.corpus_embeddings!r} was not written by {args.preset!r} "
                           f"for this corpus: its first {len(head)} rows differ from what the model gives for "
                           f"the first texts of {args.corpus!r}. Write it again with `kzoo embed {args.preset} "
                           f"--input {args.corpus} --output {args.corpus_embeddings}`"
                           f"{' --prompt-name ' + _document_prompt(model) if _document_prompt(model) else ''} "
                           "(full width, float32).")


def _check_embedding_options(args):
    if args.truncate_dim is not None:
        positive("--truncate-dim", args.truncate_dim)


def _check_model_options(model, args):
    """What needs the model: --truncate-dim within its width, --prompt-name among its prompts."""
    width = model.backbone.hidden_dim
    if args.truncate_dim is not None and args.truncate_dim > width:
        raise CommandError(f"--truncate-dim {args.truncate_dim} is above {args.preset!r}'s width of {width}: "
                           f"give at most {width}.")
    name = getattr(args, "prompt_name", None)
    if name is not None and name not in model.prompts:
        raise CommandError(f"--prompt-name {name!r}: {args.preset!r} has "
                           f"{'the prompts ' + ', '.join(model.prompts) if model.prompts else 'no prompts'}.")


def _document_prompt(model):
    return next((name for name in ("document", "passage", "corpus") if name in model.prompts), None)


def _check_preset(preset):
    """A path that cannot be a preset is refused before kzoo loads; a bare
    name goes to `from_preset`, which knows the built-in names."""
    if os.path.isfile(preset):
        raise CommandError(f"{preset!r} is a file; an embedder preset is a directory (saved by save_to_preset) "
                           "or a built-in name such as all_minilm_l6_v2.")
    looks_like_path = os.sep in preset or "/" in preset or preset.startswith(".")
    if looks_like_path and not os.path.isdir(preset):
        raise CommandError(f"No such preset directory: {preset!r}. Give a directory saved by save_to_preset, "
                           "or a built-in name such as all_minilm_l6_v2 (kzoo presets lists them).")


def _embedding_format(path):
    if path == "-" or path.lower().endswith(JSON_LINES_EXTENSIONS):
        if path != "-":
            check_writable(path)
        return "jsonl"
    if path.lower().endswith(ARRAY_EXTENSIONS):
        check_writable(path)
        return "npy"
    raise CommandError(f"--output {path!r}: name it .npy (a float32 array, a row per text) or .jsonl (the rows "
                       "with their 'embedding'), or give - for JSON lines on standard output.")


def _texts(path, fmt, columns, rows, name, option):
    shown = "standard input" if path == "-" else path
    if fmt == "txt" and name != "text":
        raise CommandError(f"{shown} is plain text (one text a line, no columns): leave out {option}, or give "
                           "a .csv, .tsv or .jsonl file.")
    return column(columns, rows, name, shown, option=option)


def _load(preset):
    kzoo = import_kzoo()  # after the arguments are checked: seconds

    return kzoo.BertTextEmbedder.from_preset(preset)


def _encode(model, texts, batch_size, method="encode", **options):
    """`model.encode` (or `encode_query` / `encode_document`) with progress on stderr."""
    kzoo = import_kzoo()

    with contextlib.redirect_stdout(sys.stderr):  # progress must not mix with what goes to stdout
        progress = kzoo.progress.predict_progress()
        return getattr(model, method)(texts, batch_size=batch_size, verbose=progress["verbose"],
                                      callbacks=progress["callbacks"], **options)
