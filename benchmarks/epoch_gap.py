"""The wait between an epoch's start and its first batch, per backend, on a real raw-text `fit`.

Run by hand, never in tests:

    python benchmarks/epoch_gap.py                      # all three backends
    python benchmarks/epoch_gap.py --backends tensorflow --busy 2

Each backend runs in its own process: `kzoo.BertClassifier.from_preset("all_minilm_l6_v2")`
with a fresh head on the main job's sentences (`examples/offline_corpora.py`, 7 areas),
`fit(texts, names, validation_split=0.25)` for several epochs, and a callback that
times `on_epoch_begin` → the first `on_train_batch_begin` of each epoch (what a
user sees as a frozen progress bar). `--busy N` keeps N processes spinning on the
CPUs meanwhile (the stall this measures grows on a busy machine). The CPU is printed
with the results; the target is a largest wait under 0.5 s on every backend.
"""

import argparse
import multiprocessing
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import common  # noqa: E402

BACKENDS = ("tensorflow", "jax", "torch")


def child(texts, epochs, batch_size, preset):
    import keras  # noqa: PLC0415

    import kzoo  # noqa: PLC0415
    from offline_corpora import library_area_task  # noqa: PLC0415

    areas, (train, labels), _ = library_area_task(texts // 7 + 1, 1)
    train, names = train[:texts], [areas[i] for i in labels[:texts]]

    class EpochGap(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.gaps, self.begun = [], None

        def on_epoch_begin(self, epoch, logs=None):
            self.begun = time.perf_counter()

        def on_train_batch_begin(self, batch, logs=None):
            if self.begun is not None:
                self.gaps.append(time.perf_counter() - self.begun)
                self.begun = None

    model = kzoo.BertClassifier.from_preset(preset, class_names=areas, sequence_length=128)
    gap = EpochGap()
    start = time.perf_counter()
    model.fit(train, names, validation_split=0.25, epochs=epochs, batch_size=batch_size, verbose=0, callbacks=[gap])
    common.report({"gaps_s": [round(g, 3) for g in gap.gaps], "fit_s": round(time.perf_counter() - start, 1),
                   "texts": len(train)})


def spin(_):
    while True:
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS))
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--preset", default="all_minilm_l6_v2")
    parser.add_argument("--busy", type=int, default=0, help="processes spinning on the CPUs meanwhile")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.texts, args.epochs, args.batch_size, args.preset)
    print(f"{common.machine_description()}; {args.texts} texts, {args.epochs} epochs, batch {args.batch_size}, "
          f"{args.busy} busy processes", flush=True)
    spinners = [multiprocessing.Process(target=spin, args=(i,), daemon=True) for i in range(args.busy)]
    for process in spinners:
        process.start()
    try:
        print("| backend | wait before each epoch's first batch (s) | largest | fit (s) |")
        print("|---|---|---|---|")
        for backend in args.backends:
            result = common.run_child(__file__, backend, [
                "--child", "--texts", args.texts, "--epochs", args.epochs, "--batch-size", args.batch_size,
                "--preset", args.preset])
            gaps = result["gaps_s"]
            print(f"| {backend} | {', '.join(f'{g:.3f}' for g in gaps)} | {max(gaps, default=0):.3f} | "
                  f"{result['fit_s']} |", flush=True)
    finally:
        for process in spinners:
            process.terminate()


if __name__ == "__main__":
    main()
