"""kzoo on torch, quiet and with a core kept busy: torch's own thread count
(one per core; `import kzoo` leaves it as it is) against fixed counts.

Run by hand, never in tests:

    python benchmarks/thread_tuning.py --seconds 90 --rounds 2
    python benchmarks/thread_tuning.py --workloads inference --settings tuned 1 2

Each setting runs `fit` (masked-LM training) or `predict` (the backbone) of
bert_small, batch 8 x 128, for about `--seconds`, in its own process, first
on the machine as it is, then while `--busy` processes spin (one core each):
"tuned" is kzoo as a user gets it (no variable set), "1", "2", ... fix the
count with OMP_NUM_THREADS. Prints tokens/s over the whole run (the tries
included) with the count each run ended at, and the fraction of its quiet
speed each setting keeps when busy (the target: at least 70%, no
variable needed), with the CPU model and flags.
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from contention import busy_cores  # noqa: E402

BATCH, LENGTH = 8, 128


def child(workload, seconds):
    """Runs `fit` or `predict` for about `seconds`; prints tokens/s and the thread count at the end."""
    import keras
    import numpy as np
    import torch

    import kzoo

    features, labels = common.bert_batch(BATCH, LENGTH)
    # As many copies of the batch as run in `seconds` at a generous 20 steps/s.
    copies = max(1, int(seconds * 20))
    stacked = {k: np.concatenate([v] * copies) for k, v in features.items()}
    backbone = kzoo.BertBackbone(**common.bert_kwargs("bert_small"))
    ends = []
    started = [None]

    counts = []

    class Clock(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            counts.append(torch.get_num_threads())

        def on_predict_batch_begin(self, batch, logs=None):
            counts.append(torch.get_num_threads())

        def on_train_batch_end(self, batch, logs=None):
            self._tick()

        def on_predict_batch_end(self, batch, logs=None):
            self._tick()

        def _tick(self):
            now = time.perf_counter()
            if started[0] is None:
                started[0] = now  # after the first step (tracing, allocation)
            else:
                ends.append(now)
            if now - started[0] > seconds:
                self.model.stop_training = True
                if not isinstance(self.model, kzoo.BertMaskedLM):
                    raise StopIteration

    if workload == "training":
        model = kzoo.BertMaskedLM(backbone)
        model.compile(optimizer=kzoo.bert_pretraining_optimizer(global_clipnorm=None))
        stacked_labels = {k: np.concatenate([v] * copies) for k, v in labels.items()}
        model.fit(stacked, stacked_labels, batch_size=BATCH, epochs=1, shuffle=False, verbose=0,
                  callbacks=[Clock()])
    else:
        inputs = {k: stacked[k] for k in ("token_ids", "segment_ids", "padding_mask")}
        try:
            backbone.predict(inputs, batch_size=BATCH, verbose=0, callbacks=[Clock()])
        except StopIteration:
            pass
    steps = len(ends)
    elapsed = ends[-1] - started[0]
    common.report({"tokens_per_second": steps * BATCH * LENGTH / elapsed, "steps": steps,
                   "threads_at_end": torch.get_num_threads(),
                   "steps_at": {str(n): counts.count(n) for n in sorted(set(counts))}})


def run(setting, workload, seconds):
    """One child run: "tuned" with no thread variable set, else OMP_NUM_THREADS=setting."""
    fixed = None if setting == "tuned" else setting
    return common.run_child(__file__, "torch", ["--child", workload, seconds],
                            {"OMP_NUM_THREADS": fixed, "MKL_NUM_THREADS": None})


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workloads", nargs="+", default=["training", "inference"])
    parser.add_argument("--settings", nargs="+", default=["tuned", "1", "2"])
    parser.add_argument("--seconds", type=float, default=90.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--busy", type=int, default=1)
    parser.add_argument("--child", nargs=2)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], float(args.child[1]))
        return
    print(f"machine: {common.machine_description()}; bert_small, batch {BATCH} x {LENGTH}, ~{args.seconds:.0f} s "
          f"a run, {args.rounds} round(s), busy: {args.busy} spinning process(es)", flush=True)
    results = {}
    for round_index in range(args.rounds):
        settings = args.settings if round_index % 2 == 0 else args.settings[::-1]
        for workload in args.workloads:
            for setting in settings:
                quiet = run(setting, workload, args.seconds)
                with busy_cores(args.busy):
                    busy = run(setting, workload, args.seconds)
                results.setdefault((workload, setting), []).append((quiet, busy))
                print(json.dumps({"round": round_index, "workload": workload, "setting": setting,
                                  "quiet": quiet, "busy": busy}), flush=True)
    print(f"\n{'workload':10} {'threads':8} {'quiet tok/s':>12} {'busy tok/s':>11} {'kept':>6}  counts at the end")
    for (workload, setting), pairs in results.items():
        quiet = statistics.median(q["tokens_per_second"] for q, _ in pairs)
        busy = statistics.median(b["tokens_per_second"] for _, b in pairs)
        ends = sorted({(q["threads_at_end"], b["threads_at_end"]) for q, b in pairs})
        print(f"{workload:10} {setting:8} {quiet:12,.0f} {busy:11,.0f} {busy / quiet:6.0%}  "
              + ", ".join(f"quiet {q} / busy {b}" for q, b in ends))


if __name__ == "__main__":
    main()
