"""Where a BERT step's time goes: kzoo's masked-LM training step or backbone inference under torch's profiler.

Run by hand, never in tests:

    KERAS_BACKEND=torch python benchmarks/profile_step.py --config bert_small --workload training
    KERAS_BACKEND=torch python benchmarks/profile_step.py --impl kerashub --workload inference

Builds the same model and batch as `bert_speed.py` (kzoo or KerasHub, random
weights, batch 8 x 128, 20 masked positions), runs two warm-up steps, then
profiles `--steps` steps with `torch.profiler` and prints the operators by
self CPU time, grouped into matrix multiplies (`addmm`, `mm`, `bmm`, fused
attention), the optimizer, and everything else. On TensorFlow and JAX the
same model runs the same matrix multiplies through XLA (see the README's
benchmark notes), so this table also bounds what skipping other work can gain
there.
"""

import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bert_speed  # noqa: E402
import common  # noqa: E402

# Operators that are matrix multiplies (their self time is the GEMM itself).
MATMULS = ("aten::addmm", "aten::mm", "aten::bmm", "aten::matmul", "aten::_scaled_dot_product_flash_attention_for_cpu",
           "aten::_scaled_dot_product_attention_math", "aten::baddbmm", "aten::linear")
OPTIMIZER = ("aten::_fused_adam_", "aten::_foreach_")


def group(name):
    """The share a profiled operator belongs to.

    Example:

    >>> group("aten::addmm"), group("aten::_fused_adam_"), group("aten::gelu")
    ('matrix multiplies', 'optimizer', 'other')
    """
    if name in MATMULS:
        return "matrix multiplies"
    if name.startswith(OPTIMIZER):
        return "optimizer"
    return "other"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", default="kzoo", choices=["kzoo", "kerashub"])
    parser.add_argument("--config", default="bert_small", choices=sorted(common.BERT_CONFIGS))
    parser.add_argument("--workload", default="training", choices=["training", "inference"])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    import keras

    if keras.backend.backend() != "torch":
        sys.exit("profile_step.py profiles with torch's profiler: run it with KERAS_BACKEND=torch")
    import torch
    from torch.profiler import ProfilerActivity, profile

    step = bert_speed.keras_step(args.impl, args.config, args.workload, "", 8, 128)
    for _ in range(2):
        step()
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        for _ in range(args.steps):
            step()
    events = profiler.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    shares = collections.Counter()
    for e in events:
        shares[group(e.key)] += e.self_cpu_time_total
    print(f"{common.machine_description()}; {args.impl} {args.config} {args.workload}, "
          f"{torch.get_num_threads()} intra-op thread(s), {args.steps} steps: "
          f"{total / 1e6 / args.steps:.2f} s of operator time per step")
    for name, time in shares.most_common():
        print(f"  {name}: {time / total:.1%}")
    print(events.table(sort_by="self_cpu_time_total", row_limit=args.top))


if __name__ == "__main__":
    main()
