"""Latency per request of a kzoo SavedModel next to the Keras model's `predict`.

Run by hand, never in tests:

    python benchmarks/saved_model_latency.py --preset all_minilm_l6_v2 --rounds 3

The parent builds a `kzoo.BertClassifier` from `--preset` (the README's main
job: all-MiniLM-L6-v2, sequence length 32; a random 6-class head, which
changes no timing), saves it as a preset directory and exports it with
`model.export(path)` once. Each contender then runs in its own process, in
alternating order over `--rounds` rounds, and times one request, strings in
and class names out, for batches of 1 and 32 texts of about 20 words:

- `saved_model`: `tf.saved_model.load(path).signatures["serving_default"]`
  called on a `tf.string` batch, in a process that imports TensorFlow and
  tensorflow-text only (tokenization, packing, the network and the class
  names are the graph);
- `keras:<backend>`: `kzoo.BertClassifier.from_preset(...)` and
  `predict_labels(texts, batch_size=len(texts))` (kzoo's tokenization in
  TensorFlow, then Keras' predict on that backend, then the argmax).

Reports the median seconds per request over rounds (each round's value the
median of `--steps` requests after a warm-up) and the first request.
"""

import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

WORDS = ("the function returns a list of values when the argument is given as a string and the file is "
         "read from disk by the module in the package").split()
CLASS_NAMES = ["io", "text", "numbers", "data", "network", "system"]
BATCHES = (1, 32)


def texts(batch):
    """`batch` texts of 18-22 words (about 25-30 tokens, within the 32 packed).

    Example:

    >>> len(texts(3)), len(texts(1)[0].split())
    (3, 18)
    """
    return [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(18 + i % 5)) for i in range(batch)]


def measure_saved_model(path, batch, steps):
    import tensorflow as tf  # noqa: PLC0415
    import tensorflow_text  # noqa: F401, PLC0415

    serve = tf.saved_model.load(path).signatures["serving_default"]
    request = tf.constant(texts(batch))
    return common.time_steps(lambda: serve(text=request)["class_names"].numpy(), steps, warmup=2)


def measure_keras(preset, batch, steps):
    import kzoo  # noqa: PLC0415

    model = kzoo.BertClassifier.from_preset(preset)
    request = texts(batch)
    return common.time_steps(lambda: model.predict_labels(request, batch_size=batch, verbose=0), steps, warmup=2)


def child(arguments):
    measure = measure_saved_model if arguments.child == "saved_model" else measure_keras
    common.report(measure(arguments.directory, arguments.batch, arguments.steps))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="all_minilm_l6_v2")
    parser.add_argument("--sequence-length", type=int, default=32)
    parser.add_argument("--backends", nargs="+", default=["tensorflow", "jax", "torch"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--child", choices=["saved_model", "keras"], help=argparse.SUPPRESS)
    parser.add_argument("--directory", help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child:
        return child(arguments)

    import kzoo  # noqa: PLC0415

    work = tempfile.mkdtemp(prefix="kzoo-latency-")
    preset, saved_model = os.path.join(work, "preset"), os.path.join(work, "saved_model")
    model = kzoo.BertClassifier.from_preset(arguments.preset, class_names=CLASS_NAMES,
                                            sequence_length=arguments.sequence_length)
    model.save_to_preset(preset)
    model.export(saved_model)
    print(f"{arguments.preset}: {model.count_params():,} parameters, sequence length {arguments.sequence_length}")
    contenders = ["saved_model"] + [f"keras:{backend}" for backend in arguments.backends]

    def measure(contender, batch):
        kind, _, backend = contender.partition(":")
        directory = saved_model if kind == "saved_model" else preset
        return common.run_child(__file__, backend or "tensorflow", [
            "--child", kind, "--directory", directory, "--batch", batch, "--steps", arguments.steps])

    for batch in BATCHES:
        results = common.alternating_rounds(contenders, arguments.rounds, lambda c: measure(c, batch))
        for contender, rounds in results.items():
            step = statistics.median(r["step_s"] for r in rounds)
            first = statistics.median(r["first_step_s"] for r in rounds)
            print(f"batch {batch:2d}  {contender:16s} {1000 * step:8.1f} ms per request "
                  f"({1000 * step / batch:6.2f} ms per text), first request {first:5.2f} s", flush=True)


if __name__ == "__main__":
    main()
