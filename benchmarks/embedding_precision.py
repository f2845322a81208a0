"""Searching int8 and binary sentence embeddings: memory, search time and the recall kept, next to float32.

Run by hand, never in tests:

    python benchmarks/embedding_precision.py --rounds 7
    python benchmarks/embedding_precision.py --smoke        # a tiny run of every code path

The vectors are those of the semantic-search example (`examples/semantic_search.py`):
its fine-tuned embedder (`--preset`, default `finetuned/docstring_search`, which the
example saves; the released `all_minilm_l6_v2` when there is none) embeds the
standard library's docstring task, the held-out summaries as queries (encode_query)
and the held-out docstrings as the corpus (encode_document), full width, float32.
The contenders are `kzoo.semantic_search` over that corpus as float32, int8 codes
(ranges from a calibration set: the training pairs' documents, which are not
searched, `kzoo.quantization_ranges`) and binary codes (`"ubinary"`, the sign packed
8 to a byte), each ranked by its codes alone and with rescoring (the best
2 x top-k rescored with the float query against the dequantized codes, as
sentence-transformers' `semantic_search_faiss` / `semantic_search_usearch`).

- Recall kept: recall@10 and MRR@10 of each contender on the example's held-out
  queries (query i's own document is document i), and their ratio to float32's.
- Memory: the corpus' bytes per vector and for `--corpus-size` vectors.
- Search time: the example's corpus is a few hundred documents, too small to
  time, so a larger one is built offline: the real document vectors (held out
  and training) repeated to `--corpus-size` rows, each copy perturbed by Gaussian
  noise of norm `--noise` and scaled back to unit length (cosine ~0.9 to its
  source at 0.5), then quantized with the same ranges. One query batch is all the
  held-out queries; a contender's time is the CPU seconds of the process (user +
  sys: NumPy's BLAS threads included, the machine's other load excluded) for
  searching the batch, codes given (quantizing the corpus is not timed).
  Contenders alternate over `--rounds` rounds (`common.alternating_rounds`) and the
  report quotes medians and ratios to float32 measured in the same run.

The table of 2026-11-29 (TensorFlow, 2 shared AMD EPYC cores with AVX-512) is in
docs/guides/embeddings.md, "Smaller vectors: int8 and binary codes".
"""

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
import common  # noqa: E402
from offline_corpora import docstring_search_task  # noqa: E402

CONTENDERS = {"float32": ("float32", False), "int8": ("int8", False), "int8 + rescore": ("int8", True),
              "binary": ("ubinary", False), "binary + rescore": ("ubinary", True)}
SMOKE = {"max_texts": 16, "corpus_size": 2000, "rounds": 2, "sequence_length": 32}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="finetuned/docstring_search",
                        help="an embedder preset (the example's fine-tuned one); all_minilm_l6_v2 when it is absent")
    parser.add_argument("--sequence-length", type=int, default=256)
    parser.add_argument("--corpus-size", type=int, default=200_000, help="rows of the timed corpus")
    parser.add_argument("--noise", type=float, default=0.5, help="norm of the noise added to each copy")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--max-texts", type=int, default=None, help="at most this many queries, documents, calibration")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, every code path")
    args = parser.parse_args(argv)
    if args.smoke:
        parser.set_defaults(**SMOKE)
        args = parser.parse_args(argv)
    if not os.path.isdir(args.preset):
        print(f"no {args.preset} (examples/semantic_search.py saves it): the released all_minilm_l6_v2", flush=True)
        args.preset = "all_minilm_l6_v2"
    return args


def embed_task(kzoo, args):
    """Held-out query and document vectors and the calibration vectors (the training documents)."""
    (_, train_documents), (queries, documents) = docstring_search_task()
    queries, documents, train_documents = (texts[:args.max_texts] for texts in (queries, documents, train_documents))
    embedder = kzoo.BertTextEmbedder.from_preset(args.preset, sequence_length=args.sequence_length)
    clock = time.perf_counter()
    vectors = embedder.encode_document(documents + train_documents, verbose=0)
    query_vectors = embedder.encode_query(queries, verbose=0)
    print(f"{args.preset}: {len(queries)} queries, {len(documents)} documents, {len(train_documents)} calibration "
          f"documents embedded in {time.perf_counter() - clock:.0f} s", flush=True)
    return query_vectors, vectors[:len(documents)], vectors[len(documents):]


def larger_corpus(np, sources, rows, noise, seed=0):
    """`rows` unit vectors: `sources` repeated, each copy plus Gaussian noise of norm `noise`."""
    rng = np.random.default_rng(seed)
    copies = sources[np.arange(rows) % len(sources)]
    perturbation = rng.standard_normal(copies.shape).astype("float32")
    copies = copies + noise * perturbation / np.linalg.norm(perturbation, axis=1, keepdims=True)
    return copies / np.linalg.norm(copies, axis=1, keepdims=True)


def main(argv=None):
    args = parse_args(argv)
    import keras  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    import kzoo  # noqa: PLC0415

    print(f"machine: {common.machine_description()}; Keras backend {keras.backend.backend()}, NumPy {np.__version__}")
    queries, documents, calibration = embed_task(kzoo, args)
    ranges = kzoo.quantization_ranges(calibration)
    relevant = [{i} for i in range(len(queries))]
    k = min(args.top_k, len(documents))

    def search(corpus_codes, name):
        precision, rescore = CONTENDERS[name]
        return kzoo.semantic_search(queries, corpus_codes, top_k=k, precision=precision, ranges=ranges,
                                    rescore=rescore)[1]

    quality = {}
    for name, (precision, _) in CONTENDERS.items():
        found = search(kzoo.quantize_embeddings(documents, precision, ranges), name)
        quality[name] = (kzoo.recall_at_k(found, relevant, k), kzoo.mrr_at_k(found, relevant, k))

    big = larger_corpus(np, np.concatenate([documents, calibration]), args.corpus_size, args.noise)
    codes = {precision: kzoo.quantize_embeddings(big, precision, ranges) for precision in ("float32", "int8", "ubinary")}

    def measure(name):
        cpu, wall = time.process_time(), time.perf_counter()
        search(codes[CONTENDERS[name][0]], name)
        return {"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall}

    print(f"timing {len(queries)} queries against {args.corpus_size:,} vectors, {args.rounds} rounds", flush=True)
    rounds = common.alternating_rounds(list(CONTENDERS), args.rounds, measure)
    cpu = {name: statistics.median(r["cpu_s"] for r in results) for name, results in rounds.items()}
    wall = {name: statistics.median(r["wall_s"] for r in results) for name, results in rounds.items()}
    print(f"\n| contender | bytes per vector | {args.corpus_size:,} vectors | search CPU ms (x float32) | "
          f"wall ms (x float32) | recall@{k} (kept) | MRR@{k} (kept) |\n|---|---|---|---|---|---|---|")
    for name, (precision, _) in CONTENDERS.items():
        stored = codes[precision]
        recall, mrr = quality[name]
        print(f"| {name} | {stored.nbytes // len(stored):,} | {stored.nbytes / 2**20:,.1f} MiB | "
              f"{cpu[name] * 1e3:,.0f} ({cpu[name] / cpu['float32']:.2f}x) | "
              f"{wall[name] * 1e3:,.0f} ({wall[name] / wall['float32']:.2f}x) | "
              f"{recall:.3f} ({recall / quality['float32'][0]:.3f}) | {mrr:.3f} ({mrr / quality['float32'][1]:.3f}) |")


if __name__ == "__main__":
    main()
