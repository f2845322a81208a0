"""BERT speed on a busy machine: each contender quiet, then with other processes keeping cores busy.

Run by hand, never in tests:

    python benchmarks/contention.py --rounds 2
    python benchmarks/contention.py --contenders kzoo:torch hf:torch --busy 1 --workloads training

A user's laptop is never quiet: a browser, an editor or another job keeps a
core busy. For each contender (see `bert_speed.py` for what each computes),
every round measures it in its own process with the machine as it is, then
again while `--busy` processes spin (`while True: pass`, one core each), in
alternating contender order. Reports the median tokens/s of both and the
fraction kept under load (the target: kzoo keeps at least 70%, next
to Hugging Face under the same load), with the CPU model and flags.
"""

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bert_speed  # noqa: E402
import common  # noqa: E402

CONTENDERS = ("kzoo:torch", "kerashub:torch", "hf:torch", "kzoo:tensorflow", "kzoo:jax")


@contextlib.contextmanager
def busy_cores(count):
    """`count` processes that keep one core each busy while the block runs.

    Example:

    >>> with busy_cores(0):
    ...     pass
    """
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def measure(contenders, config_name, workload, rounds, busy, batch, length, steps):
    """`{contender: {"quiet": [result, ...], "busy": [result, ...]}}` over alternating rounds."""

    def quiet_then_busy(contender):
        arguments = ["--child", contender, config_name, workload, batch, length, steps]
        backend = contender.split(":")[1]
        quiet = common.run_child(bert_speed.__file__, backend, arguments)
        with busy_cores(busy):
            loaded = common.run_child(bert_speed.__file__, backend, arguments)
        return {"quiet": quiet, "busy": loaded}

    raw = common.alternating_rounds(list(contenders), rounds, quiet_then_busy)
    return {c: {k: [r[k] for r in results] for k in ("quiet", "busy")} for c, results in raw.items()}


def table(results, busy, work_per_step):
    lines = [
        f"| workload | contender | quiet tokens/s | tokens/s with {busy} core(s) busy | kept |",
        "|---|---|---|---|---|",
    ]
    for label, per_contender in results.items():
        for contender, runs in per_contender.items():
            quiet, loaded = (work_per_step / statistics.median(r["step_s"] for r in runs[k])
                             for k in ("quiet", "busy"))
            lines.append(f"| {label} | {contender} | {quiet:.0f} | {loaded:.0f} | {loaded / quiet:.0%} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["bert_small"], choices=sorted(common.BERT_CONFIGS))
    parser.add_argument("--workloads", nargs="+", default=["training", "inference"])
    parser.add_argument("--contenders", nargs="+", default=list(CONTENDERS))
    parser.add_argument("--busy", type=int, default=1, help="processes spinning during the loaded run")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--output", default="benchmarks/results/contention.json")
    args = parser.parse_args()

    print(f"{common.machine_description()}, load {os.getloadavg()[0]:.1f}", flush=True)
    results = {}
    for config_name in args.configs:
        for workload in args.workloads:
            label = f"{config_name} {workload}"
            results[label] = measure(args.contenders, config_name, workload, args.rounds, args.busy,
                                     args.batch, args.length, args.steps)
            print(table({label: results[label]}, args.busy, args.batch * args.length), flush=True)
    print(f"\n{common.machine_description()}; medians over {args.rounds} rounds of {args.steps} steps, "
          f"batch {args.batch} x {args.length}; load {os.getloadavg()[0]:.1f} after\n")
    print(table(results, args.busy, args.batch * args.length))
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump({"machine": common.machine_description(), "busy": args.busy, "results": results}, f, indent=2)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
