"""Where a BERT step's time goes under XLA (JAX or TensorFlow): kzoo next to KerasHub, by part of the model.

Run by hand, never in tests:

    python benchmarks/profile_xla_step.py --config bert_base --workload training --rounds 2
    python benchmarks/profile_xla_step.py --backend tensorflow --config bert_small --workload inference

Each contender runs in its own process (alternating over the rounds, as in
`bert_speed.py`) with the same model and batch as `bert_speed.py` (random
weights, batch 8 x 128, 20 masked positions; kzoo's default compilation, XLA
on both backends, against KerasHub's fastest: its default on JAX, `jit_compile=True`
on TensorFlow). A child times `--steps` steps (wall clock), then records
`--steps` more with `jax.profiler` or `tf.profiler` and reads the trace's
XLA:CPU thunks back (the XPlane protobuf that TensorFlow's wheel ships). Every
thunk is an instruction of the step's optimized HLO (dumped with `XLA_FLAGS`),
which names the Keras layer and operation it came from; the table groups thunk
time by that: matrix multiplies, optimizer, dropout, LayerNorm, GELU, softmax,
the masked-LM head and loss, copies/transposes, other. Thunk times are summed
over XLA's threads (more than the wall clock where thunks overlap) and include
the profiler's own cost.
"""

import argparse
import collections
import contextlib
import glob
import json
import os
import re
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

# Keywords of an instruction's `op_name` (its Keras layer path), first match wins.
PARTS = (
    ("optimizer update", ("adam", "optimizer")),
    ("dropout (random bits, masks)", ("dropout", "random")),
    ("LayerNorm", ("layer_norm", "layernorm")),
    ("masked-LM head and loss", ("mlm_head", "entropy", "loss", "log_softmax")),
    ("GELU", ("erf", "gelu", "tanh")),
    ("softmax", ("softmax",)),
)
MATMULS = "matrix multiplies"
COPIES = "copies / transposes"
OTHER = "other (bias adds, residuals, embeddings, masks)"


def part_of(op_name, operations):
    """The part of the step an HLO instruction belongs to.

    Args:
        op_name: str. The instruction's `op_name` metadata (its JAX/Keras path).
        operations: set of str. The HLO operations it runs (a fusion's body).

    Example:

    >>> part_of("jit(train_step)/jvp(bert)/layer_0/feed_forward/erfc", {"multiply", "divide"})
    'GELU'
    >>> part_of("jit(train_step)/bert_adam_w/add", {"dot"})
    'matrix multiplies'
    >>> part_of("jit(train_step)/jvp(bert)/layer_0/self_attention/exp", {"exponential"})
    'softmax'
    >>> part_of("jit(train_step)/state[0]", {"copy"})
    'copies / transposes'
    """
    if operations & {"dot", "convolution"}:
        return MATMULS
    name = op_name.lower()
    if "attention" in name and ("/exp" in name or "reduce_max" in name):
        return "softmax"  # kzoo's on JAX: `ops.softmax` names no layer of its own
    for part, keywords in PARTS:
        if any(keyword in name for keyword in keywords):
            return part
    if operations <= {"copy", "transpose", "bitcast", "parameter", "constant"} or name.startswith("state["):
        return COPIES
    return OTHER


def hlo_parts(text):
    """`{instruction name: part}` for the top-level instructions of an optimized HLO module's text.

    Example:

    >>> hlo_parts('%fusion.1 = f32[2] fusion(%a), calls=%f.1, metadata={op_name="x/dropout/mul"}\\n')
    {'fusion.1': 'dropout (random bits, masks)'}
    """
    bodies = {m.group(1): m.group(2) for m in re.finditer(r"^%?([\w.\-]+) .*?\{\n(.*?)\n\}", text, re.S | re.M)}
    parts = {}
    for line in text.splitlines():
        match = re.match(r"\s*(?:ROOT )?%([\w.\-]+) = (\S+) ([\w\-]+)\(", line)
        if not match:
            continue
        called = re.search(r"calls=%([\w.\-]+)", line)
        body = bodies.get(called.group(1), "") if called else ""
        operations = set(re.findall(r"= \S+ ([\w\-]+)\(", body)) | {match.group(3)}
        op_name = re.search(r'op_name="([^"]*)"', line)
        # Unnamed fusions that make unsigned integers are random bits (XLA's ThreeFry).
        op_name = op_name.group(1) if op_name else ("random bits" if match.group(2).startswith("u32") else "")
        parts[match.group(1)] = part_of(op_name, operations)
    return parts


@contextlib.contextmanager
def _profiler(backend, directory):
    if backend == "jax":
        import jax  # noqa: PLC0415

        with jax.profiler.trace(directory):
            yield
    else:
        import tensorflow as tf  # noqa: PLC0415

        tf.profiler.experimental.start(directory)
        try:
            yield
        finally:
            tf.profiler.experimental.stop()


def child(contender, config_name, workload, steps):
    with tempfile.TemporaryDirectory(prefix="kzoo_hlo_") as dump, tempfile.TemporaryDirectory(
        prefix="kzoo_trace_"
    ) as trace:
        common.report(_profiled(contender, config_name, workload, steps, dump, trace))


def _profiled(contender, config_name, workload, steps, dump, trace):
    os.environ["XLA_FLAGS"] = " ".join(
        [os.environ.get("XLA_FLAGS", ""), f"--xla_dump_to={dump}", "--xla_dump_hlo_as_text", "--xla_dump_hlo_pass_re=NONE"]
    )
    import bert_speed  # noqa: PLC0415 (imports the backend: after XLA_FLAGS)
    import keras  # noqa: PLC0415
    from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: PLC0415

    impl, _, option = contender.partition(":")
    step = bert_speed.keras_step(impl, config_name, workload, option, 8, 128)  # returns host values
    timing = common.time_steps(step, steps)
    with _profiler(keras.backend.backend(), trace):
        for _ in range(steps):
            step()
    module = max(glob.glob(f"{dump}/*after_optimizations.txt"), key=os.path.getsize)  # the step
    with open(module) as f:
        parts = hlo_parts(f.read())
    space = xplane_pb2.XSpace()
    with open(glob.glob(f"{trace}/**/*.xplane.pb", recursive=True)[0], "rb") as f:
        space.ParseFromString(f.read())
    seconds = collections.Counter()
    for plane in space.planes:
        names = {key: meta.name for key, meta in plane.event_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                part = parts.get(names.get(event.metadata_id))
                if part:
                    seconds[part] += event.duration_ps / 1e12 / steps
    return {**timing, "parts_s": dict(seconds)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="bert_base", choices=sorted(common.BERT_CONFIGS))
    parser.add_argument("--workload", default="training", choices=["training", "inference"])
    parser.add_argument("--backend", default="jax", choices=["jax", "tensorflow"])
    parser.add_argument("--contenders", nargs="+", default=None,
                        help="kzoo, kerashub, kerashub:xla (jit_compile=True); defaults to kzoo and "
                             "KerasHub's fastest: kerashub on JAX, kerashub:xla on TensorFlow")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.config, args.workload, args.steps)

    contenders = args.contenders or ["kzoo", "kerashub" if args.backend == "jax" else "kerashub:xla"]
    arguments = ["--config", args.config, "--workload", args.workload, "--steps", args.steps]
    results = common.alternating_rounds(
        contenders,
        args.rounds,
        lambda contender: common.run_child(__file__, args.backend, [*arguments, "--child", contender]),
        label=f"{args.config} {args.workload}",
    )
    medians = {
        impl: {
            "step_s": statistics.median(r["step_s"] for r in runs),
            "parts_s": {p: statistics.median(r["parts_s"].get(p, 0.0) for r in runs)
                        for p in {p for r in runs for p in r["parts_s"]}},
        }
        for impl, runs in results.items()
    }
    print(f"{common.machine_description()}; {args.backend} {args.config} {args.workload}, batch 8 x 128, "
          f"medians over {args.rounds} round(s) of {args.steps} steps; XLA thunk time per step summed over threads")
    header = " | ".join(f"{impl} s/step (share)" for impl in contenders)
    print(f"| part | {header} |\n|---|" + "---|" * len(contenders))
    order = sorted({p for m in medians.values() for p in m["parts_s"]}, key=lambda p: -medians[contenders[0]]["parts_s"].get(p, 0))
    for part in [*order, "all XLA thunks", "wall clock per step"]:
        cells = []
        for impl in contenders:
            parts = medians[impl]["parts_s"]
            total = sum(parts.values())
            if part == "wall clock per step":
                cells.append(f"{medians[impl]['step_s']:.3f}")
            elif part == "all XLA thunks":
                cells.append(f"{total:.3f}")
            else:
                cells.append(f"{parts.get(part, 0.0):.3f} ({parts.get(part, 0.0) / total:.1%})")
        print(f"| {part} | " + " | ".join(cells) + " |")
    print(json.dumps(medians))


if __name__ == "__main__":
    main()
