"""Pre-training data at corpus scale: peak memory and examples/s of
`kzoo.data.write_pretraining_shards` on generated corpora of growing size.

Run by hand, never in tests:

    python benchmarks/corpus_shards.py --sizes 100M 1G 5G --processes 1 2

For each size, a synthetic corpus in google-research's format (a sentence
per line, a blank line between documents; Zipf-distributed words of a
20,000-word vocabulary, ~14 words per sentence, ~12 sentences per document)
is generated under `--workdir` in files of `--file-size`, then written to
TFRecord shards (sequence length 128, NSP + MLM) by 1 and by 2 processes.
Each run is a child process; the parent samples the resident memory of the
child and its workers (psutil) and reports the peak of their sum and of the
largest process, and their CPU time (user + system; on a shared machine,
examples per CPU second vary less than examples/s). With `--time-budget`, a run is stopped after that many
seconds and the examples of the finished shards count (memory is the peak so
far). `--in-memory` also measures `pretraining_dataset` holding the same
corpus (one pass). Corpora and shards are deleted afterwards.
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

SEQUENCE_LENGTH = 128
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
UNITS = {"K": 10**3, "M": 10**6, "G": 10**9}


def parse_size(text):
    """`"100M"` → 100,000,000 bytes.

    >>> parse_size("100M"), parse_size("5G"), parse_size("512")
    (100000000, 5000000000, 512)
    """
    text = text.strip().upper()
    return int(float(text[:-1]) * UNITS[text[-1]]) if text[-1] in UNITS else int(text)


def make_words(count, rng):
    """`count` distinct lower-case words of 2 to 9 letters."""
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = set()
    while len(words) < count:
        words.add("".join(rng.choice(letters, rng.integers(2, 10))))
    return sorted(words)


def write_corpus(folder, total_bytes, file_bytes, vocabulary_size=20_000, seed=0):
    """Synthetic text files in google-research's format, `file_bytes` each,
    `total_bytes` in all; returns the vocabulary file (special tokens, ".",
    the words). Vectorised: each word id picks one of three byte strings,
    `"word "`, `"word.\\n"` (ends a sentence) or `"word.\\n\\n"` (ends a document)."""
    rng = np.random.default_rng(seed)
    words = make_words(vocabulary_size, rng)
    table = [w + " " for w in words] + [w + ".\n" for w in words] + [w + ".\n\n" for w in words]
    encoded = np.frombuffer("".join(table).encode("ascii"), np.uint8)
    lengths = np.array([len(t) for t in table])
    starts = np.cumsum(lengths) - lengths
    frequency = 1.0 / np.arange(1, vocabulary_size + 1)  # Zipf
    cdf = np.cumsum(frequency / frequency.sum())
    os.makedirs(folder, exist_ok=True)
    for index in range(max(1, round(total_bytes / file_bytes))):
        with open(os.path.join(folder, f"part-{index:05d}.txt"), "wb") as f:
            written = 0
            while written < file_bytes:
                size = 1_000_000
                ids = np.minimum(np.searchsorted(cdf, rng.random(size)), vocabulary_size - 1)
                ends_sentence = rng.random(size) < 1 / 14
                ends_document = ends_sentence & (rng.random(size) < 1 / 12)
                ids = ids + vocabulary_size * (ends_sentence.astype(np.int64) + ends_document)
                row_lengths = lengths[ids]
                offsets = np.cumsum(row_lengths) - row_lengths
                positions = np.arange(row_lengths.sum()) + np.repeat(starts[ids] - offsets, row_lengths)
                chunk = encoded[positions].tobytes()
                f.write(chunk)
                written += len(chunk)
            f.write(b".\n\n")
    vocabulary_path = os.path.join(folder, "vocab.txt")
    with open(vocabulary_path, "w", encoding="utf-8") as f:
        f.write("\n".join(SPECIAL_TOKENS + ["."] + words) + "\n")
    return vocabulary_path


def child(args):
    """One measured run, in its own process: prints one JSON line."""
    import tensorflow as tf

    import kzoo

    tokenizer = kzoo.BertTokenizer(args.vocabulary)
    start = time.perf_counter()
    if args.mode == "in_memory":
        dataset = kzoo.data.pretraining_dataset(
            os.path.join(args.corpus, "part-*.txt"), tokenizer, SEQUENCE_LENGTH, batch_size=256, seed=0,
            progress=False,
        )
        examples = sum(int(labels["mask_ids"].shape[0]) for _, labels in dataset)
        elapsed = time.perf_counter() - start
    else:
        files = kzoo.data.write_pretraining_shards(
            os.path.join(args.corpus, "part-*.txt"), args.output, tokenizer, SEQUENCE_LENGTH, seed=0,
            documents_per_window=args.window, num_processes=args.processes, progress=False,
        )
        elapsed = time.perf_counter() - start
        examples = int(tf.data.TFRecordDataset(files).reduce(np.int64(0), lambda n, _: n + 1))
    print(json.dumps({"examples": examples, "seconds": elapsed}), flush=True)


def measure(command, time_budget):
    """Runs `command`, sampling the resident memory of it and its children
    every 0.2 s; returns (peak total bytes, peak of one process, stdout, stopped)."""
    import psutil

    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    parent = psutil.Process(process.pid)
    peak_total = peak_one = 0
    start, stopped = time.perf_counter(), False
    while process.poll() is None:
        try:
            rss = [p.memory_info().rss for p in [parent, *parent.children(recursive=True)]]
        except psutil.Error:
            rss = []
        peak_total, peak_one = max(peak_total, sum(rss)), max([peak_one, *rss])
        if time_budget and time.perf_counter() - start > time_budget:
            for p in [*parent.children(recursive=True), parent]:
                try:
                    p.kill()
                except psutil.Error:
                    pass
            stopped = True
            break
        time.sleep(0.2)
    out = process.communicate()[0]
    return peak_total, peak_one, out, stopped


def count_finished(output):
    """Examples in the finished shards of `output` (scratch files are hidden)."""
    import tensorflow as tf

    files = sorted(tf.io.gfile.glob(os.path.join(output, "*.tfrecord")))
    return int(tf.data.TFRecordDataset(files).reduce(np.int64(0), lambda n, _: n + 1)) if files else 0


def run(corpus, vocabulary, mode, processes, window, time_budget):
    output = tempfile.mkdtemp(prefix="shards-", dir=os.path.dirname(corpus))
    command = [
        sys.executable, __file__, "--child", "--corpus", corpus, "--vocabulary", vocabulary, "--output", output,
        "--mode", mode, "--processes", str(processes), "--window", str(window),
    ]
    start, cpu_start = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    peak_total, peak_one, out, stopped = measure(command, time_budget)
    elapsed = time.perf_counter() - start
    cpu_end = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = cpu_end.ru_utime + cpu_end.ru_stime - cpu_start.ru_utime - cpu_start.ru_stime
    if stopped:
        result = {"examples": count_finished(output), "seconds": elapsed}
    else:
        result = json.loads(out.strip().splitlines()[-1])
    shutil.rmtree(output, ignore_errors=True)
    return {
        **result,
        "per_s": result["examples"] / result["seconds"],
        "cpu_seconds": None if stopped else cpu,  # killed workers are never waited for: their CPU is lost
        "peak_rss_total_mb": peak_total / 2**20,
        "peak_rss_process_mb": peak_one / 2**20,
        "stopped_after_budget": stopped,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["100M", "1G", "5G"])
    parser.add_argument("--processes", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--file-size", default="25M", help="bytes per generated text file")
    parser.add_argument("--window", type=int, default=10_000, help="documents_per_window")
    parser.add_argument("--time-budget", type=float, default=0, help="stop a run after this many s (0: never)")
    parser.add_argument("--budget-from", default="5G", help="apply --time-budget from this corpus size on")
    parser.add_argument("--in-memory", nargs="*", default=[], help="sizes to also run pretraining_dataset on")
    parser.add_argument("--workdir", default=tempfile.gettempdir())
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    for name in ("--corpus", "--vocabulary", "--output", "--mode"):
        parser.add_argument(name, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.processes = args.processes[0]
        return child(args)

    print("| corpus | pipeline | processes | examples | seconds | examples/s | CPU seconds "
          "| peak RSS, all processes (MB) | peak RSS, largest process (MB) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for size in args.sizes:
        corpus = tempfile.mkdtemp(prefix=f"corpus-{size}-", dir=args.workdir)
        try:
            start = time.perf_counter()
            vocabulary = write_corpus(corpus, parse_size(size), parse_size(args.file_size))
            print(f"(generated {size} in {time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
            budget = args.time_budget if parse_size(size) >= parse_size(args.budget_from) else 0
            runs = [("shards", p) for p in args.processes] + [("in_memory", 1)] * (size in args.in_memory)
            for mode, processes in runs:
                r = run(corpus, vocabulary, mode, processes, args.window, budget)
                note = f" (stopped after {budget:.0f} s)" if r["stopped_after_budget"] else ""
                print(f"| {size} | {mode} | {processes} | {r['examples']}{note} | {r['seconds']:.0f} | "
                      f"{r['per_s']:.0f} | {'n/a' if r['cpu_seconds'] is None else round(r['cpu_seconds'])} | "
                      f"{r['peak_rss_total_mb']:.0f} | "
                      f"{r['peak_rss_process_mb']:.0f} |",
                      flush=True)
        finally:
            shutil.rmtree(corpus, ignore_errors=True)


if __name__ == "__main__":
    main()
