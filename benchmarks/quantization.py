"""int8 inference: float32 vs `quantize("int8")` on the main job's task, per backend.

Run by hand, never in tests:

    python benchmarks/quantization.py --rounds 3
    python benchmarks/quantization.py --smoke          # a tiny run of every code path

The main job is `examples/bert_finetuning.py`: all-MiniLM-L6-v2 (BERT, 6
layers, hidden 384) fine-tuned to tell the area of Python's library a
sentence documents (7 areas). The benchmark loads the preset that example
saves (`--preset`, default `finetuned/bert_python_docs_areas`); when there is
none, it runs the example first (`--no-scratch`, TensorFlow) to write it. Every
backend reads the same preset, so float32 and int8 are the same trained model.

Each measurement runs in its own process (`common.run_child`): the preset
loaded, then as is (`float32`) or after `model.quantize("int8")` (`int8`).
A child reports the held-out accuracy (the example's 668 test sentences,
packed by the preset's preprocessor, batches of 32; first round only: it
does not change), the latency of `predict_on_batch` on packed inputs of the
example's sequence length (32) at batch 1 and 32 (median of `--steps`, after
a compile step and a warm-up), and the bytes of its weights. The
`onnxruntime` contenders export the float model from TensorFlow
(`format="onnx"`, with `int8=True` for int8: onnxruntime's dynamic
quantization of every kernel) and time `InferenceSession.run` the same way,
with onnxruntime's default threads; their size is `model.onnx`'s. The contenders alternate over `--rounds` rounds
(`common.alternating_rounds`); the report quotes medians over rounds and the
ratios float32 / int8 measured in the same run.

Measured 2026-11-25 on 2 cores of an AMD EPYC (AVX-512), shared with other
jobs, 3 rounds of 10 steps (the example's preset: held-out accuracy 0.675):

| backend | accuracy float32 → int8 | batch 1 ms (speed-up) | batch 32 ms (speed-up) | weights MiB (smaller) |
|---|---|---|---|---|
| tensorflow | 0.675 → 0.674 | 36.7 → 33.0 (1.11x) | 474 → 490 (0.97x) | 86.7 → 22.5 (3.85x) |
| jax | 0.675 → 0.672 | 25.2 → 30.5 (0.82x) | 304 → 339 (0.90x) | 86.7 → 22.5 (3.85x) |
| torch | 0.675 → 0.672 | 54.2 → 104.5 (0.52x) | 470 → 1603 (0.29x) | 86.7 → 22.5 (3.85x) |
| onnxruntime | 0.675 → 0.672 | 34.2 → 80.9 (0.42x) | 770 → 1254 (0.61x) | 97.0 → 43.1 (2.25x), model.onnx |

int8 keeps the accuracy (within 0.3 points) and cuts the weights about 4x,
but is no faster on this CPU: Keras' int8 layers quantize their inputs on
the fly and the backends' CPU int8 matrix products are not faster than
their float32 ones (torch's much slower).
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "bert_finetuning.py")
BACKENDS = ("tensorflow", "jax", "torch")
ONNX = "onnxruntime"  # the TensorFlow export of each variant, run by onnxruntime
VARIANTS = ("float32", "int8")
BATCHES = (1, 32)
SMOKE = {"train_per_area": 8, "test_per_area": 8, "sequence_length": 16}
FULL = {"train_per_area": 160, "test_per_area": 96, "sequence_length": 32}


def held_out(smoke):
    """The example's held-out sentences and labels (its split, seed 0)."""
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from offline_corpora import library_area_task  # noqa: PLC0415

    sizes = SMOKE if smoke else FULL
    _, _, (texts, labels) = library_area_task(sizes["train_per_area"], sizes["test_per_area"], seed=0)
    return texts, labels


def child(preset, variant, smoke, steps, with_accuracy, onnx):
    """One contender's measurement, reported as one JSON line."""
    import keras  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    import kzoo  # noqa: PLC0415

    model = kzoo.BertClassifier.from_preset(preset)
    if variant == "int8" and not onnx:
        model.quantize("int8")
    texts, labels = held_out(smoke)
    if onnx:  # the model exported (kzoo.export.onnx), run by onnxruntime on the CPU
        import tempfile  # noqa: PLC0415

        import onnxruntime  # noqa: PLC0415

        path = os.path.join(tempfile.mkdtemp(), "onnx")
        model.export(path, format="onnx", int8=variant == "int8")  # onnxruntime's own int8
        session = onnxruntime.InferenceSession(os.path.join(path, "model.onnx"), providers=["CPUExecutionProvider"])
        result = {"weight_bytes": os.path.getsize(os.path.join(path, "model.onnx"))}

        def logits(packed):
            return session.run(["logits"], packed)[0]
    else:
        result = {"weight_bytes": sum(int(np.prod(v.shape)) * np.dtype(keras.backend.standardize_dtype(v.dtype))
                                      .itemsize for v in model.weights)}
        logits = model.predict_on_batch
    if with_accuracy:
        packed = {k: v.numpy() for k, v in model.preprocessor(texts).items()}
        predicted = np.concatenate([np.argmax(logits({k: v[i:i + 32] for k, v in packed.items()}), axis=-1)
                                    for i in range(0, len(texts), 32)])
        result["accuracy"] = float(np.mean(predicted == np.array(labels)))
    for batch in BATCHES:
        rows = (texts * batch)[:batch]
        packed = {k: v.numpy() for k, v in model.preprocessor(rows).items()}
        result[f"batch{batch}_s"] = common.time_steps(lambda: logits(packed), steps)["step_s"]
    result["step_s"] = result[f"batch{BATCHES[-1]}_s"]  # what alternating_rounds prints
    common.report(result)


def ensure_preset(preset, smoke):
    """Runs the example to write `preset` when it is not there yet."""
    if os.path.isdir(preset):
        return
    command = [sys.executable, EXAMPLE, "--no-scratch", "--output", preset] + (["--smoke"] if smoke else [])
    print(f"no preset at {preset}: running {' '.join(command[1:])}", flush=True)
    subprocess.run(command, check=True, cwd=ROOT, env=dict(os.environ, KERAS_BACKEND="tensorflow"))


def measure(preset, backends, rounds, steps, smoke):
    """`{backend: {variant: summary}}`: medians over alternating rounds."""
    results = {}
    for backend in backends:
        contenders = [f"{backend}:{variant}" for variant in VARIANTS]
        first = set()

        def run(contender):
            variant = contender.split(":")[1]
            with_accuracy = contender not in first
            first.add(contender)
            keras_backend = "tensorflow" if backend == ONNX else backend  # int8 exports from TensorFlow only
            return common.run_child(__file__, keras_backend, ["--child", preset, variant, int(smoke), steps,
                                                              int(with_accuracy), int(backend == ONNX)])

        raw = common.alternating_rounds(contenders, rounds, run, label=backend)
        results[backend] = {
            contender.split(":")[1]: {
                "accuracy": next(r["accuracy"] for r in runs if "accuracy" in r),
                "weight_mib": runs[0]["weight_bytes"] / 2**20,
                **{f"batch{b}_ms": 1000 * statistics.median(r[f"batch{b}_s"] for r in runs) for b in BATCHES},
                "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in runs),
                "rounds": len(runs),
            }
            for contender, runs in raw.items()
        }
    return results


def table(results):
    """Markdown rows: per backend, float32 and int8 side by side with the ratios."""
    rows = [
        "| backend | accuracy float32 → int8 (points) | batch 1 ms float32 → int8 (speed-up) "
        "| batch 32 ms float32 → int8 (speed-up) | weights MiB float32 → int8 (smaller) |",
        "|---|---|---|---|---|",
    ]
    for backend, s in results.items():
        f, q = s["float32"], s["int8"]
        rows.append(
            f"| {backend} | {f['accuracy']:.3f} → {q['accuracy']:.3f} ({100 * (q['accuracy'] - f['accuracy']):+.1f}) "
            + "".join(f"| {f[f'batch{b}_ms']:.1f} → {q[f'batch{b}_ms']:.1f} "
                      f"(**{f[f'batch{b}_ms'] / q[f'batch{b}_ms']:.2f}x**) " for b in BATCHES)
            + f"| {f['weight_mib']:.1f} → {q['weight_mib']:.1f} (**{f['weight_mib'] / q['weight_mib']:.2f}x**) |"
        )
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default=None,
                        help="the fine-tuned preset (default: the example's finetuned/bert_python_docs_areas)")
    parser.add_argument("--backends", nargs="+", default=[*BACKENDS, ONNX], choices=[*BACKENDS, ONNX],
                        help=f"Keras backends, and {ONNX}: the ONNX export (from TensorFlow) run by onnxruntime")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help="the example's smoke preset, 1 round, 2 steps")
    parser.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    parser.add_argument("--output", default="benchmarks/results/quantization.json")
    args = parser.parse_args()
    if args.child:
        preset, variant, smoke, steps, with_accuracy, onnx = args.child
        child(preset, variant, bool(int(smoke)), int(steps), bool(int(with_accuracy)), bool(int(onnx)))
        return

    if args.smoke:
        args.rounds, args.steps = 1, 2
    default = os.path.join(ROOT, "finetuned", "bert_python_docs_areas")
    if args.smoke:
        import tempfile  # noqa: PLC0415

        default = os.path.join(tempfile.gettempdir(), "kzoo-smoke", "tensorflow", "bert_python_docs_areas")
    preset = os.path.abspath(args.preset or default)
    ensure_preset(preset, args.smoke)
    results = measure(preset, args.backends, args.rounds, args.steps, args.smoke)
    when = datetime.datetime.now().strftime("%Y-%m-%d")
    print(f"\n{when}, {common.machine_description()}; preset {preset}; "
          f"median over {args.rounds} rounds of {args.steps} steps:")
    print("\n".join(table(results)))
    if ONNX in results:  # the fastest int8 route against each backend's Keras float32
        int8_ms = results[ONNX]["int8"]["batch32_ms"]
        print("onnxruntime int8, batch 32, against Keras float32: " + ", ".join(
            f"{b} {results[b]['float32']['batch32_ms'] / int8_ms:.2f}x" for b in results if b != ONNX))
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump({"date": when, "preset": preset, "rounds": args.rounds, "results": results}, f, indent=2)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
