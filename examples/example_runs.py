"""What every example script shares: `--smoke` runs and progress that a reader can follow.

`--smoke` runs every code path of a script's full run (training, evaluation,
saving, reloading, ...) with tiny sizes and few steps, in about a minute on 2
CPU cores; `tests/run_examples.py` runs each script's smoke mode on every
Keras backend (it is part of CI). A smoke run writes under
`<system temp dir>/kzoo-smoke/<backend>/` unless `--output` says otherwise,
never into the directories a full run fills (`pretrained/`, `finetuned/`).

Progress: on a terminal, Keras' own progress bar (moves every step); when
stdout is a file or a pipe (CI logs, `... > log`), one plain line every
`LOG_EVERY_SECONDS` instead of Keras' bar, whose carriage-return redraws and
colour codes would fill a log with one very long line.
"""

import os
import sys
import tempfile
import time

import keras
import numpy as np

LOG_EVERY_SECONDS = 10


def parse_arguments(parser, smoke_defaults, argv=None):
    """`parser.parse_args(argv)` with a `--smoke` flag: when given, the
    arguments' defaults become `smoke_defaults` (flags given explicitly still win)."""
    parser.add_argument("--smoke", action="store_true",
                        help="a tiny run of every code path (about a minute; CI runs it), "
                             f"written under {smoke_directory()} unless --output is given")
    if parser.parse_known_args(argv)[0].smoke:
        parser.set_defaults(**smoke_defaults)
    args = parser.parse_args(argv)
    if args.smoke:
        print(f"smoke run ({keras.backend.backend()}): tiny sizes and steps, every code path", flush=True)
    return args


def smoke_directory(*names):
    """`<system temp dir>/kzoo-smoke/<backend>/<names...>`: where smoke runs write
    (`bert_finetuning.py --smoke --preset <this>/bert_python_docs` fine-tunes
    what `bert_pretraining.py --smoke` saved on the same backend)."""
    return os.path.join(tempfile.gettempdir(), "kzoo-smoke", keras.backend.backend(), *names)


def interactive():
    """Whether stdout is a terminal (a live progress bar) rather than a file or pipe."""
    return hasattr(sys.stdout, "isatty") and sys.stdout.isatty()


def fit_progress(distributed=None, curves=None):
    """`fit` keyword arguments for progress: Keras' bar on a terminal, else a
    line every `LOG_EVERY_SECONDS` and one per epoch. A distributed engine with
    its own training loop (torch DDP) takes `verbose` only and logs each epoch.
    `curves`, a `kzoo.visualize.TrainingCurves`, is added to the callbacks (it
    keeps its picture up to date during `fit`)."""
    from kzoo.distribution import Distributed  # noqa: PLC0415 (the examples import kzoo anyway)

    if distributed is not None and type(distributed).fit is not Distributed.fit:
        return {"verbose": 1}
    extra = [] if curves is None else [curves]
    if interactive():
        return {"verbose": 1, "callbacks": extra}
    return {"verbose": 0, "callbacks": [ProgressLines(), *extra]}


class Progress:
    """A progress display for work outside `fit` (`add(n)` as units get done):
    `keras.utils.Progbar` on a terminal, else a line at most every
    `LOG_EVERY_SECONDS` and one at the end."""

    def __init__(self, total, unit="step", label="", bar=None):
        self.total, self.unit, self.label = total, unit, label
        bar = interactive() if bar is None else bar
        self.bar = keras.utils.Progbar(total, unit_name=unit) if bar else None
        self.done, self.start, self.last = 0, time.perf_counter(), time.perf_counter()
        self.first = None  # (time, units) after the first update: the first step compiles

    def add(self, count, values=None):
        self.update(self.done + count, values)

    def update(self, done, values=None, final_line=True):
        """`done` units in all; `values`: `[(name, value)]` or a function
        returning them (called only when a line is printed)."""
        self.done = done
        if self.first is None:
            self.first = (time.perf_counter(), done)
        values = values() if callable(values) and self.bar is not None else values
        if self.bar is not None:
            self.bar.update(done, values=values)
            return
        now = time.perf_counter()
        finished = bool(self.total) and self.done >= self.total
        if (now - self.last >= LOG_EVERY_SECONDS and not finished) or (final_line and finished):
            self.last = now
            print(self.line(now, values() if callable(values) else values), flush=True)

    def line(self, now, values=None):
        elapsed = now - self.start
        done = f"{self.done}/{self.total}" if self.total else f"{self.done}"
        text = f"{self.label}{done} {self.unit}s, {elapsed:.0f} s"
        first_time, first_done = self.first or (now, self.done)
        if first_done < self.done < self.total:  # the rate after the first update (compilation)
            left = (now - first_time) / (self.done - first_done) * (self.total - self.done)
            text += f", about {left:.0f} s left"
        return text + "".join(f" - {name}: {value:.4f}" for name, value in values or ())


class ProgressLines(keras.callbacks.Callback):
    """`fit` progress for logs: a line every `LOG_EVERY_SECONDS` (steps done,
    time, time left, running metrics) and one at each epoch's end."""

    def on_train_begin(self, logs=None):
        self.epochs = self.params.get("epochs", 1)

    def on_epoch_begin(self, epoch, logs=None):
        label = f"epoch {epoch + 1}/{self.epochs}: " if self.epochs > 1 else ""
        self.progress = Progress(self.params.get("steps") or 0, "step", label, bar=False)

    def on_train_batch_end(self, batch, logs=None):
        # on_epoch_end prints the last line, with the validation metrics.
        self.progress.update(batch + 1, lambda: _scalars(logs), final_line=False)

    def on_epoch_end(self, epoch, logs=None):
        print(self.progress.line(time.perf_counter(), _scalars(logs)), flush=True)


def _scalars(logs):
    return [(name, float(value)) for name, value in (logs or {}).items() if np.ndim(value) == 0]
