"""LoRA against full fine-tuning on the main job's task, on each backend:
held-out accuracy, trainable parameters, peak memory and step time.

Run by hand, never in tests:

    python benchmarks/lora_finetuning.py                                # 3 backends, full and LoRA
    python benchmarks/lora_finetuning.py --lora-rates 5e-4 1e-3 2e-3    # LoRA's learning-rate grid
    python benchmarks/lora_finetuning.py --architecture bert_base_uncased --steps 6   # speed and memory only

The task is examples/bert_finetuning.py's: sentences of the standard
library's docstrings labelled with their area of the library (7 areas,
1,120 training and 668 test sentences, shipped offline), from the
all_minilm_l6_v2 preset, sequence length 128, batch 32, 4 epochs, BERT's
fine-tuning optimizer (AdamW, 10% warm-up, linear decay, clipping at 1.0).
Full fine-tuning runs at the example's 5e-5; LoRA (rank 8 on query and
value, `enable_lora(8)`) at each rate of `--lora-rates`. Every run is its
own process, so its peak resident memory (`getrusage`) is its own; step
time is the median over the training steps after the first of each
sequence length (compilation); with `--rounds N` the contenders alternate
N times and the medians are printed. `--architecture NAME` builds that preset's
architecture with random weights (`load_weights=False`) and times `--steps`
steps on the same texts: speed and memory only.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import common  # noqa: E402

BACKENDS = ("tensorflow", "jax", "torch")


def worker(mode, learning_rate, architecture, steps, seed, targets=None):
    """One run in this process; returns its measurements."""
    import keras  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    import kzoo  # noqa: PLC0415
    from offline_corpora import library_area_task  # noqa: PLC0415

    keras.utils.set_random_seed(seed)
    areas, (texts, labels), (test_texts, test_labels) = library_area_task(160, 96, seed=seed)
    if architecture:
        tokenizer = kzoo.BertClassifier.from_preset("all_minilm_l6_v2", num_classes=2).preprocessor.tokenizer
        backbone = kzoo.BertBackbone.from_preset(architecture, load_weights=False, vocabulary_size=tokenizer.vocabulary_size())
        model = kzoo.BertClassifier(backbone, class_names=areas, preprocessor=kzoo.BertPreprocessor(tokenizer, 128))
        texts, labels = texts[: steps * 32], labels[: steps * 32]
        epochs = 1
    else:
        model = kzoo.BertClassifier.from_preset("all_minilm_l6_v2", class_names=areas, sequence_length=128)
        epochs = 4
    if mode == "lora":
        model.enable_lora(8, target_layer_names=targets)
    trainable = sum(int(np.prod(v.shape)) for v in model.trainable_weights)
    total_steps = epochs * -(-len(texts) // 32)
    model.compile(optimizer=kzoo.bert_finetuning_optimizer(total_steps, learning_rate=learning_rate))

    class StepTimes(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.start = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            times.append(time.perf_counter() - self.start)

    times = []
    start = time.perf_counter()
    model.fit(texts, np.array(labels), epochs=epochs, batch_size=32, verbose=0, callbacks=[StepTimes()])
    seconds = time.perf_counter() - start
    result = {
        "trainable": trainable,
        "parameters": model.count_params(),
        "step_s": statistics.median(sorted(times)[: max(1, len(times) - 4)]),  # 4 lengths' compile steps left out
        "fit_s": seconds,
        "peak_rss_mb": common.peak_rss_mb(),
    }
    if not architecture:
        predictions = np.argmax(model.predict(test_texts, batch_size=32, verbose=0), -1)
        result["accuracy"] = float(np.mean(predictions == np.array(test_labels)))
    return result


def run(backend, mode, learning_rate, args):
    command = [sys.executable, os.path.abspath(__file__), "--worker", mode, "--rate", str(learning_rate),
               "--steps", str(args.steps), "--seed", str(args.seed)]
    if args.architecture:
        command += ["--architecture", args.architecture]
    if args.targets:
        command += ["--targets", *args.targets]
    environment = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(command, env=environment, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{backend} {mode} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    parser.add_argument("--full-rate", type=float, default=5e-5)
    parser.add_argument("--lora-rates", type=float, nargs="+", default=[1e-3])
    parser.add_argument("--architecture", default=None, help="a preset name: random weights, speed and memory only")
    parser.add_argument("--steps", type=int, default=6, help="with --architecture: training steps timed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=1, help="alternating rounds; medians are printed")
    parser.add_argument("--targets", nargs="+", help="LoRA's target layers (default: query and value)")
    parser.add_argument("--worker", choices=("full", "lora"), help=argparse.SUPPRESS)
    parser.add_argument("--rate", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.rate, args.architecture, args.steps, args.seed, args.targets)))
        return
    print(f"machine: {common.machine_description()}; {time.strftime('%Y-%m-%d')}")
    print(f"{'backend':11} {'run':14} {'accuracy':>8} {'trainable':>11} {'peak MiB':>9} {'step s':>7} {'fit s':>6}")
    for backend in args.backends:
        runs = [("full", args.full_rate)] + [("lora", rate) for rate in args.lora_rates]
        results = {run_: [] for run_ in runs}
        for _ in range(args.rounds):  # contenders alternate: a drifting machine hits each alike
            for mode, rate in runs:
                results[mode, rate].append(run(backend, mode, rate, args))
        for (mode, rate), found in results.items():
            r = {key: statistics.median(f[key] for f in found) for key in found[0]}
            accuracy = f"{r['accuracy']:.3f}" if "accuracy" in r else "-"
            print(f"{backend:11} {f'{mode} {rate:g}':14} {accuracy:>8} {int(r['trainable']):>11,} "
                  f"{r['peak_rss_mb']:>9.0f} {r['step_s']:>7.3f} {r['fit_s']:>6.0f}", flush=True)


if __name__ == "__main__":
    main()
