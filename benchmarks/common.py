"""What the benchmark scripts share: configs, child processes, timing, FLOPs, peaks.

Every measurement of a model runs in its own process (the Keras backend is
fixed at import, and the peak memory must be the contender's own). The parent
runs the contenders in alternating order over several rounds and reads one
JSON line from each child.
"""

import json
import os
import resource
import statistics
import subprocess
import sys
import time

BERT_CONFIGS = {
    "bert_small": dict(num_layers=4, hidden_dim=512, num_heads=8),
    "bert_base": dict(num_layers=12, hidden_dim=768, num_heads=12),
}
VOCABULARY_SIZE = 30522
MAX_PREDICTIONS = 20  # masked positions per sequence of 128 (google-research/bert)


def bert_kwargs(config_name):
    """The constructor arguments shared by kzoo's and KerasHub's `BertBackbone`.

    Example:

    >>> bert_kwargs("bert_small")["intermediate_dim"]
    2048
    """
    config = BERT_CONFIGS[config_name]
    return dict(
        vocabulary_size=VOCABULARY_SIZE,
        intermediate_dim=4 * config["hidden_dim"],
        max_sequence_length=512,
        **config,
    )


def hf_bert_config(config_name):
    """The same architecture as a Hugging Face `BertConfig` (exact GELU, dropout 0.1).

    Example:

    >>> hf_bert_config("bert_base").num_hidden_layers  # doctest: +SKIP
    12
    """
    import transformers

    kwargs = bert_kwargs(config_name)
    return transformers.BertConfig(
        vocab_size=kwargs["vocabulary_size"],
        hidden_size=kwargs["hidden_dim"],
        num_hidden_layers=kwargs["num_layers"],
        num_attention_heads=kwargs["num_heads"],
        intermediate_size=kwargs["intermediate_dim"],
    )


def bert_batch(batch, length, predictions=MAX_PREDICTIONS, seed=0):
    """Random packed BERT features and masked-LM labels, as NumPy int32/float32.

    Example:

    >>> features, labels = bert_batch(2, 16, predictions=3)
    >>> features["mask_positions"].shape, labels["mask_weights"].dtype
    ((2, 3), dtype('float32'))
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    features = {
        "token_ids": rng.integers(1000, VOCABULARY_SIZE, size=(batch, length)).astype("int32"),
        "segment_ids": np.zeros((batch, length), "int32"),
        "padding_mask": np.ones((batch, length), "int32"),
        "mask_positions": np.sort(
            np.stack([rng.choice(length, predictions, replace=False) for _ in range(batch)]), axis=1
        ).astype("int32"),
    }
    labels = {
        "mask_ids": rng.integers(1000, VOCABULARY_SIZE, size=(batch, predictions)).astype("int32"),
        "mask_weights": np.ones((batch, predictions), "float32"),
    }
    return features, labels


def bert_flops(config_name, length, predictions, training):
    """Model FLOPs per sequence: the encoder on every token, the masked-LM head
    (transform + tied vocabulary projection) on `predictions` positions;
    training counts 3x the forward pass (backward = 2x forward).
    The same count is used for every contender, so MFU compares like with like.

    Example:

    >>> f"{bert_flops('bert_base', 128, 0, training=False) / 1e9:.1f}"
    '22.3'
    """
    kwargs = bert_kwargs(config_name)
    h, inner, layers = kwargs["hidden_dim"], kwargs["intermediate_dim"], kwargs["num_layers"]
    per_token = layers * (2 * (4 * h * h + 2 * h * inner) + 2 * 2 * length * h)  # + Q K^T, P V
    head = 2 * (h * h + h * kwargs["vocabulary_size"]) * predictions
    return (per_token * length + head) * (3 if training else 1)


def transformer_flops(config, source_length, target_length, training):
    """Model FLOPs per sentence pair of the encoder-decoder Transformer (sec. 3),
    the output projection over every target position included; training = 3x.

    Example:

    >>> config = dict(num_layers=6, hidden_dim=512, intermediate_dim=2048, vocabulary_size=37000)
    >>> f"{transformer_flops(config, 128, 128, training=True) / 1e9:.0f}"
    '50'
    """
    d, inner, n = config["hidden_dim"], config["intermediate_dim"], config["num_layers"]
    ffn, projections = 2 * 2 * d * inner, 2 * 4 * d * d
    encoder = n * source_length * (projections + ffn + 2 * 2 * source_length * d)
    decoder = n * target_length * (
        2 * projections + ffn + 2 * 2 * (target_length + source_length) * d
    )
    logits = 2 * target_length * d * config["vocabulary_size"]
    return (encoder + decoder + logits) * (3 if training else 1)


# The CPU features that decide which kernels run: AVX2/AVX-512 float32, native bfloat16 (AVX512-BF16, AMX).
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def machine_description(cpuinfo="/proc/cpuinfo"):
    """The machine in words: CPU count, model and the vector flags that decide
    its float32/bfloat16 speed (every benchmark result names it).

    Example:

    >>> machine_description().split(" CPUs")[0].isdigit()
    True
    """
    model, flags = "unknown CPU", set()
    try:
        with open(cpuinfo) as file:
            for line in file:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
    except OSError:
        pass
    present = [flag for flag in CPU_FLAGS if flag in flags] or ["none of " + "/".join(CPU_FLAGS)]
    return f"{os.cpu_count()} CPUs, {model} ({', '.join(present)}), no GPU"


def matmul_peak_gflops(size=2048, repeats=7):
    """The best float32 matrix-multiply rate of this machine now (NumPy, `size`²),
    the reference for model-FLOPs utilisation; the median of `repeats` runs.

    Example:

    >>> matmul_peak_gflops(size=64, repeats=1) > 0
    True
    """
    import numpy as np

    a = np.random.default_rng(0).random((size, size), dtype=np.float32)
    a @ a  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        a @ a
        times.append(time.perf_counter() - start)
    return 2 * size**3 / statistics.median(times) / 1e9


def peak_rss_mb():
    """This process's resident-set high-water mark in MiB (`getrusage`, Linux KiB).

    Example:

    >>> peak_rss_mb() > 1
    True
    """
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def time_steps(step, steps, warmup=1):
    """Runs `step()` once (the compile step, timed), `warmup` more times, then
    `steps` timed times; returns `{"first_step_s", "step_s" (median)}`.

    Example:

    >>> sorted(time_steps(lambda: None, steps=3))
    ['first_step_s', 'step_s']
    """
    start = time.perf_counter()
    step()
    first = time.perf_counter() - start
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return {"first_step_s": first, "step_s": statistics.median(times)}


def report(result):
    """Prints a child's result as the one JSON line the parent reads, with the peak RSS.

    Example:

    >>> report({"step_s": 0.5})  # doctest: +ELLIPSIS
    {"step_s": 0.5, "peak_rss_mb": ...}
    """
    print(json.dumps({**result, "peak_rss_mb": peak_rss_mb()}), flush=True)


def run_child(script, backend, arguments, environment=None):
    """Runs `python script ...arguments` under `KERAS_BACKEND=backend` (and
    `environment`'s variables; None removes one) and returns the dict it
    printed last (see `report`). Raises with the child's stderr on failure.

    Example:

    >>> run_child("benchmarks/common.py", "jax", [])  # doctest: +SKIP
    """
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    for name, value in (environment or {}).items():
        env.pop(name, None)
        if value is not None:
            env[name] = value
    command = [sys.executable, script, *map(str, arguments)]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def alternating_rounds(contenders, rounds, measure, label=""):
    """Calls `measure(contender)` for every contender in every round, forward
    order in even rounds and reversed in odd ones (so drifting load hits all
    alike); returns `{contender: [result, ...]}`.

    Example:

    >>> alternating_rounds(["a", "b"], 2, lambda c: {"step_s": 1.0})
    {'a': [{'step_s': 1.0}, {'step_s': 1.0}], 'b': [{'step_s': 1.0}, {'step_s': 1.0}]}
    """
    results = {contender: [] for contender in contenders}
    for round_index in range(rounds):
        order = contenders if round_index % 2 == 0 else contenders[::-1]
        for contender in order:
            results[contender].append(measure(contender))
            if label:
                step = results[contender][-1].get("step_s")
                print(f"  round {round_index + 1} {label} {contender}: step {step:.3f} s", flush=True)
    return results


def summarize(results, work_per_step, flops_per_step=None, peak_gflops=None):
    """Medians over rounds of a contender's results: throughput (`work_per_step`
    units per second), first-step time, peak RSS, and MFU when FLOPs are given.

    Example:

    >>> summarize([{"step_s": 2.0, "first_step_s": 5.0, "peak_rss_mb": 100.0}], 1024)
    {'per_s': 512.0, 'step_s': 2.0, 'first_step_s': 5.0, 'peak_rss_mb': 100.0, 'rounds': 1}
    """
    step = statistics.median(r["step_s"] for r in results)
    summary = {
        "per_s": work_per_step / step,
        "step_s": step,
        "first_step_s": statistics.median(r["first_step_s"] for r in results),
        "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in results),
        "rounds": len(results),
    }
    if flops_per_step and peak_gflops:
        summary["gflops"] = flops_per_step / step / 1e9
        summary["mfu"] = summary["gflops"] / peak_gflops
    return summary
