"""Progress that a reader can follow, for `fit` and for work outside it.

On a terminal: Keras' own progress bar (moves every step). When stdout is a
file or a pipe (CI logs, `... > log`, the `kzoo` command under a scheduler):
one plain line every `LOG_EVERY_SECONDS` instead of Keras' bar, whose
carriage-return redraws and colour codes would fill a log with one very long
line. The examples and the `kzoo` command use these.
"""

import sys
import time

import keras
import numpy as np

LOG_EVERY_SECONDS = 10


def interactive():
    """Whether stdout is a terminal (a live progress bar) rather than a file or pipe.

    Example:

    >>> interactive() in (True, False)
    True
    """
    return hasattr(sys.stdout, "isatty") and sys.stdout.isatty()


def fit_progress(distributed=None, curves=None, callbacks=()):
    """`fit` keyword arguments for progress: Keras' bar on a terminal, else a
    line every `LOG_EVERY_SECONDS` and one per epoch.

    Args:
        distributed: `kzoo.distribution.Distributed` or None. A distributed
            engine with its own training loop (torch DDP) takes `verbose`
            only and logs each epoch. Defaults to `None`.
        curves: `kzoo.visualize.TrainingCurves` or None. Added to the
            callbacks (it keeps its picture up to date during `fit`).
            Defaults to `None`.
        callbacks: iterable of `keras.callbacks.Callback`. More callbacks
            (e.g. `keras.callbacks.EarlyStopping`), after the progress and the
            curves. Defaults to `()`.

    Returns:
        A dict of `fit` keyword arguments: `verbose` and `callbacks`.

    Example:

    >>> arguments = fit_progress()
    >>> sorted(arguments)
    ['callbacks', 'verbose']
    """
    from kzoo.distribution import Distributed  # noqa: PLC0415 (only when distributed is used)

    if distributed is not None and type(distributed).fit is not Distributed.fit:
        return {"verbose": 1}
    extra = ([] if curves is None else [curves]) + list(callbacks)
    if interactive():
        return {"verbose": 1, "callbacks": extra}
    return {"verbose": 0, "callbacks": [ProgressLines(), *extra]}


def predict_progress():
    """`predict` keyword arguments for progress: Keras' bar on a terminal, else
    a line every `LOG_EVERY_SECONDS` and one at the end.

    Example:

    >>> sorted(predict_progress())
    ['callbacks', 'verbose']
    """
    if interactive():
        return {"verbose": 1, "callbacks": []}
    return {"verbose": 0, "callbacks": [ProgressLines()]}


class Progress:
    """A progress display for work outside `fit` (`add(n)` as units get done):
    `keras.utils.Progbar` on a terminal, else a line at most every
    `LOG_EVERY_SECONDS` and one at the end.

    Args:
        total: int. Units in all (0: unknown).
        unit: str. What a unit is called. Defaults to `"step"`.
        label: str. Printed before the count. Defaults to `""`.
        bar: bool or None. A live bar; `None`: on a terminal. Defaults to `None`.

    Example:

    >>> progress = Progress(3, unit="sentence", label="translating: ", bar=False)
    >>> progress.add(3)  # doctest: +ELLIPSIS
    translating: 3/3 sentences, 0 s
    """

    def __init__(self, total, unit="step", label="", bar=None):
        self.total, self.unit, self.label = total, unit, label
        bar = interactive() if bar is None else bar
        self.bar = keras.utils.Progbar(total, unit_name=unit) if bar else None
        self.done, self.start, self.last = 0, time.perf_counter(), time.perf_counter()
        self.first = None  # (time, units) after the first update: the first step compiles

    def add(self, count, values=None):
        """`count` more units done (see `update`)."""
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
        """The log line at time `now` (`time.perf_counter()`)."""
        elapsed = now - self.start
        done = f"{self.done}/{self.total}" if self.total else f"{self.done}"
        plural = self.unit + ("es" if self.unit.endswith(("s", "sh", "ch", "x")) else "s")
        text = f"{self.label}{done} {plural}, {elapsed:.0f} s"
        first_time, first_done = self.first or (now, self.done)
        if first_done < self.done < self.total:  # the rate after the first update (compilation)
            left = (now - first_time) / (self.done - first_done) * (self.total - self.done)
            text += f", about {left:.0f} s left"
        return text + "".join(f" - {name}: {value:.4f}" for name, value in values or ())


class ProgressLines(keras.callbacks.Callback):
    """`fit` and `predict` progress for logs: a line every `LOG_EVERY_SECONDS`
    (steps done, time, time left, running metrics) and one at each epoch's
    end (at the end of `predict`).

    Example:

    >>> import numpy as np, keras
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(loss="mse")
    >>> _ = model.fit(np.zeros((4, 2)), np.zeros((4, 1)), epochs=1, verbose=0,
    ...               callbacks=[ProgressLines()])  # doctest: +ELLIPSIS
    1/1 steps, ... s - loss: 0.0000
    """

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

    def on_predict_begin(self, logs=None):
        self.progress = Progress(self.params.get("steps") or 0, "batch", "predicting: ", bar=False)

    def on_predict_batch_end(self, batch, logs=None):
        self.progress.update(batch + 1)


def _scalars(logs):
    return [(name, float(value)) for name, value in (logs or {}).items() if np.ndim(value) == 0]
