"""Every kzoo benchmark in one command: BERT, the Transformer and the pre-training data pipeline.

Run by hand, never in tests (about an hour on 2 CPU cores with the defaults;
`--quick` for a smoke run of a few minutes):

    python benchmarks/run_all.py --rounds 3
    python benchmarks/run_all.py --quick

Measures, each model measurement in its own process and contenders in
alternating order over `--rounds` rounds (see `bert_speed.py`,
`transformer_speed.py` and `pretraining_data.py` for what each contender
computes):

- BERT inference and training step (bert_small = L4 H512 A8, bert_base) on
  each backend, kzoo next to KerasHub (TensorFlow: Keras' default and
  `jit_compile=True`) and Hugging Face torch eager;
- the Transformer base training step and beam-search decoding on each backend;
- the pre-training data pipeline next to KerasHub and Hugging Face.

Reports medians, ratios measured in the same run, model-FLOPs utilisation
against the float32 matmul peak measured in the same run (NumPy 2048², best
of the measurements before and after), first-step (compile) time and peak
RSS, then checks its targets. Writes
`benchmarks/results/run_all.json` and `benchmarks/results/run_all.png`.
"""

import argparse
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bert_speed  # noqa: E402
import common  # noqa: E402
import transformer_speed  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def data_pipeline(rounds):
    """`pretraining_data.py`'s medians, run in a TensorFlow child process."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pretraining_data.py")
    return common.run_child(script, "tensorflow", ["--rounds", rounds, "--json"])


def target_checks(results):
    """Issue 9's targets as `(description, measured, target, met)` rows."""
    checks = []
    bert = results["bert"]
    for config_name, workloads in bert.items():
        for workload, s in workloads.items():
            for backend in ("tensorflow", "jax", "torch"):
                ours = s.get(f"kzoo:{backend}")
                peers = {c: v for c, v in s.items() if c.startswith(f"kerashub:{backend}")}
                if not ours or not peers:
                    continue
                if workload == "training":
                    # TensorFlow is compared against KerasHub with XLA forced on.
                    peer = peers.get(f"kerashub:{backend}:xla", peers.get(f"kerashub:{backend}"))
                    checks.append((f"{config_name} training {backend}: kzoo ÷ KerasHub",
                                   ours["per_s"] / peer["per_s"], 1.2))
                    checks.append((f"{config_name} training {backend}: peak RSS KerasHub ÷ kzoo",
                                   peer["peak_rss_mb"] / ours["peak_rss_mb"], 1.0))
                    if backend == "torch" and "hf:torch" in s:
                        checks.append((f"{config_name} training torch: kzoo ÷ HF eager",
                                       ours["per_s"] / s["hf:torch"]["per_s"], 1.0))
                    if backend == "jax":
                        checks.append((f"{config_name} training jax: MFU", ours["mfu"], 0.55))
                else:
                    if backend == "torch" and "hf:torch" in s:
                        peers["hf:torch"] = s["hf:torch"]
                    best = max(v["per_s"] for v in peers.values())
                    checks.append((f"{config_name} inference {backend}: kzoo ÷ best peer",
                                   ours["per_s"] / best, 1.1))
    data = results.get("data_pipeline")
    if data:
        checks.append(("data pipeline: kzoo ÷ KerasHub examples/s",
                       data["kzoo"]["per_s"] / data["kerashub"]["per_s"], 2.0))
        base = bert.get("bert_base", {}).get("training", {})
        consumed = max((v["per_s"] for c, v in base.items() if c.startswith("kzoo:")), default=None)
        if consumed:
            length = results["settings"]["length"]
            checks.append(("data pipeline ÷ kzoo bert_base training (examples/s)",
                           data["kzoo"]["per_s"] / (consumed / length), 5.0))
    return [(name, value, target, value >= target) for name, value, target in checks]


def markdown(results):
    """The tables the command prints (and the README shows)."""
    settings = results["settings"]
    lines = [
        f"{settings['date']}, {settings['machine']}; medians over {settings['rounds']} rounds "
        f"({settings['base_rounds'] or settings['rounds']} for bert_base) of "
        f"{settings['steps']} timed steps, batch {settings['batch']} x {settings['length']}; "
        f"float32 matmul peak {results['matmul_peak_gflops']:.0f} GFLOP/s; "
        f"load average {settings['load_before']} before, {settings['load_after']} after.",
        "",
        bert_speed.TABLE_HEADER,
        *bert_speed.ratio_rows(results["bert"]),
        "",
        "| every contender | tokens/s | MFU | first step (s) | peak RSS (MiB) |",
        "|---|---|---|---|---|",
    ]
    for config_name, workloads in results["bert"].items():
        for workload, summaries in workloads.items():
            for contender, s in summaries.items():
                lines.append(f"| {config_name} {workload} {contender} | {s['per_s']:.0f} "
                             f"| {s.get('mfu', 0):.0%} | {s['first_step_s']:.1f} | {s['peak_rss_mb']:.0f} |")
    for workload, summaries in results.get("transformer", {}).items():
        for contender, s in summaries.items():
            mfu = f"{s['mfu']:.0%}" if "mfu" in s else "-"
            lines.append(f"| transformer_base {workload} {contender} | {s['per_s']:.0f} | {mfu} "
                         f"| {s['first_step_s']:.1f} | {s['peak_rss_mb']:.0f} |")
    data = results.get("data_pipeline")
    if data:
        lines += ["", "| data pipeline | examples/s | real tokens/example | real tokens/s |", "|---|---|---|---|"]
        for name, d in data.items():
            lines.append(f"| {name} | {d['per_s']:.0f} | {d['tokens_per_example']:.0f} | {d['tokens_per_s']:.0f} |")
    lines += ["", "| target | measured | needed | met |", "|---|---|---|---|"]
    for name, value, target, met in results["targets"]:
        shown = f"{value:.0%}" if "MFU" in name else f"{value:.2f}"
        needed = f"{target:.0%}" if "MFU" in name else f"{target:.1f}"
        lines.append(f"| {name} | {shown} | {needed} | {'yes' if met else '**no**'} |")
    return "\n".join(lines)


def chart(results, path):
    """A PNG: tokens/s of every BERT contender relative to KerasHub's default on
    the same backend, one panel per config and workload."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(c, w, s) for c, ws in results["bert"].items() for w, s in ws.items()]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4.5), squeeze=False)
    for ax, (config_name, workload, summaries) in zip(axes[0], panels):
        names = list(summaries)
        values = [summaries[n]["per_s"] for n in names]
        colors = ["tab:green" if n.startswith("kzoo") else "tab:gray" if n.startswith("kerashub") else "tab:orange"
                  for n in names]
        ax.barh(names, values, color=colors)
        ax.invert_yaxis()
        ax.set_title(f"{config_name} {workload}")
        ax.set_xlabel("tokens/s (higher is better)")
        for y, v in enumerate(values):
            ax.text(v, y, f" {v:.0f}", va="center", fontsize=8)
    fig.suptitle(f"kzoo vs KerasHub vs HF, {results['settings']['machine']}, {results['settings']['date']}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def load_average():
    return f"{os.getloadavg()[0]:.1f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["bert_small", "bert_base"], choices=sorted(common.BERT_CONFIGS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--base-rounds", type=int, help="rounds for bert_base (default: --rounds)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--skip", nargs="*", default=[], choices=["bert", "transformer", "data"])
    parser.add_argument("--workloads", nargs="+", default=["inference", "training"],
                        help="BERT workloads (the Transformer's training/decoding follow: "
                             "'training' alone skips decoding)")
    parser.add_argument("--contenders", nargs="+", default=list(bert_speed.CONTENDERS),
                        help="BERT contenders (see bert_speed.py)")
    parser.add_argument("--quick", action="store_true", help="bert_small only, 1 round of 2 steps")
    parser.add_argument("--machine", default=common.machine_description())
    parser.add_argument("--date", default=datetime.date.today().isoformat())
    args = parser.parse_args()
    if args.quick:
        args.configs, args.rounds, args.steps = ["bert_small"], 1, 2

    settings = dict(vars(args), load_before=load_average())
    peaks = [common.matmul_peak_gflops()]
    print(f"matmul peak {peaks[0]:.0f} GFLOP/s, load {settings['load_before']}", flush=True)
    results = {"settings": settings}
    if "bert" not in args.skip:
        results["bert"] = {}
        for config_name in args.configs:
            rounds = args.base_rounds if config_name == "bert_base" and args.base_rounds else args.rounds
            results["bert"].update(bert_speed.measure(
                args.contenders, [config_name], args.workloads, rounds,
                args.batch, args.length, args.steps, peaks[0],
            ))
    if "transformer" not in args.skip:
        workloads = ["training", "decoding"] if "inference" in args.workloads else ["training"]
        results["transformer"] = transformer_speed.measure(
            transformer_speed.CONTENDERS, workloads, args.rounds, args.batch,
            args.length, args.steps, peaks[0],
        )
    if "data" not in args.skip:
        results["data_pipeline"] = data_pipeline(args.rounds)
    peaks.append(common.matmul_peak_gflops())
    settings["load_after"] = load_average()
    # MFU against the best peak seen in this run (the conservative reading).
    peak = max(peaks)
    results["matmul_peak_gflops"], results["matmul_peaks_gflops"] = peak, peaks
    for group in (results.get("bert", {}).values(), [results.get("transformer", {})]):
        for workloads in group:
            for summaries in workloads.values():
                for s in summaries.values():
                    if "gflops" in s:
                        s["mfu"] = s["gflops"] / peak
    results["targets"] = target_checks(results) if "bert" in results else []

    table = markdown(results) if "bert" in results else json.dumps(results, indent=2)
    print("\n" + table)
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "run_all.json"), "w") as f:
        json.dump(results, f, indent=2)
    with open(os.path.join(RESULTS, "run_all.md"), "w") as f:
        f.write(table + "\n")
    if "bert" in results:
        chart(results, os.path.join(RESULTS, "run_all.png"))
    print(f"\nwrote {RESULTS}/run_all.json, run_all.md, run_all.png")


if __name__ == "__main__":
    main()
