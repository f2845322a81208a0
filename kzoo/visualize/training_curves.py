"""Training curves as pictures: `plot_history` after `fit`, and the
`TrainingCurves` callback, which keeps a PNG up to date during `fit` (loss
and metrics per step and per epoch, validation, and the learning rate from
the optimizer's schedule: BERT's warm-up then decay, A.2; the Transformer's
warm-up then inverse square root, sec. 5.3).
"""

import time

import keras
import numpy as np

from kzoo.visualize.figures import new_figure, save_figure


def plot_history(history, path=None, title=None):
    """Loss and metrics per epoch (training and validation), one panel each.

    Args:
        history: `keras.callbacks.History` or dict. What `fit` returned, or its
            `.history` dict of lists (`"loss"`, `"val_loss"`, metrics,
            `"learning_rate"` when logged).
        path: str, `os.PathLike` or None. Where to save (`.png`, `.svg` or
            `.pdf`). Defaults to `None`: not saved.
        title: str or None. A title over the panels. Defaults to `None`.

    Returns:
        A `matplotlib.figure.Figure`, one axes per quantity, in the order of
        the history's keys (validation drawn with its training quantity).

    Example:

    >>> figure = plot_history({"loss": [0.9, 0.5, 0.4], "val_loss": [1.0, 0.7, 0.6],
    ...                        "accuracy": [0.5, 0.7, 0.8]})
    >>> [axes.get_title() for axes in figure.axes]
    ['loss', 'accuracy']
    """
    logs = getattr(history, "history", history)
    if not isinstance(logs, dict) or not logs:
        raise ValueError(
            "plot_history takes what `fit` returned (a keras.callbacks.History) or its `.history` "
            f"dict of per-epoch lists; got {type(history).__name__} with nothing to plot."
        )
    curves = {}
    for key, values in logs.items():
        name = key[4:] if key.startswith("val_") else key
        epochs = np.arange(1, len(values) + 1)
        curves.setdefault(name, {})["validation" if key.startswith("val_") else "training"] = (epochs, values)
    return _draw(curves, "epoch", path, title)


@keras.saving.register_keras_serializable(package="kzoo")
class TrainingCurves(keras.callbacks.Callback):
    """Keeps a picture of the run's training curves up to date during `fit`.

    Records, every step, the loss and metrics as Keras reports them (the mean
    over the epoch so far, as the progress bar shows) and the learning rate
    the optimizer's schedule gives that step; at each epoch's end, the
    epoch's values and the validation values. Saves the picture at each
    epoch's end, at the end of `fit` when it recorded something since (a
    `fit` stopped within an epoch), and during an epoch at most every
    `every_seconds`.

    Args:
        path: str or `os.PathLike`. The picture to write (`.png`, `.svg` or `.pdf`).
        every_seconds: float. The most time between two saves during an
            epoch. Defaults to `60.0`.

    Example:

    >>> import os, tempfile
    >>> import numpy as np
    >>> import keras
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> path = os.path.join(tempfile.mkdtemp(), "curves.png")
    >>> _ = model.fit(np.ones((8, 2)), np.ones(8), batch_size=4, epochs=2, verbose=0,
    ...               callbacks=[TrainingCurves(path)])
    >>> os.path.getsize(path) > 0
    True
    """

    def __init__(self, path, every_seconds=60.0):
        super().__init__()
        self.path = path
        self.every_seconds = float(every_seconds)
        self.steps, self.step_logs, self.learning_rates = [], {}, []
        self.epoch_ends, self.epoch_logs = [], {}
        self._step, self._schedule, self._saved_at, self._saved = 0, None, 0.0, None

    def on_train_begin(self, logs=None):
        optimizer = getattr(self.model, "optimizer", None)
        self._step = int(keras.ops.convert_to_numpy(optimizer.iterations)) if optimizer is not None else 0
        self._schedule = _learning_rate_schedule(optimizer)
        self._saved_at = time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
        self._step += 1
        self.steps.append(self._step)
        for key, value in (logs or {}).items():
            self.step_logs.setdefault(key, []).append(float(value))
        if self._schedule is not None:
            self.learning_rates.append(self._schedule(self._step - 1))
        if time.monotonic() - self._saved_at >= self.every_seconds:
            self.save()

    def on_epoch_end(self, epoch, logs=None):
        self.epoch_ends.append(self._step)
        for key, value in (logs or {}).items():
            self.epoch_logs.setdefault(key, []).append(float(value))
        self.save()

    def on_train_end(self, logs=None):
        if self._recorded() != self._saved:  # the last epoch's end drew it all (a redraw costs ~0.5 s)
            self.save()

    def _recorded(self):
        return len(self.steps), len(self.epoch_ends)

    def figure(self):
        """The curves recorded so far, as a `matplotlib.figure.Figure` (x: optimizer step)."""
        curves = {}
        for key, values in self.step_logs.items():
            if key != "learning_rate":
                curves.setdefault(key, {})["training (epoch mean so far)"] = (self.steps, values)
        for key, values in self.epoch_logs.items():
            if key == "learning_rate":
                continue
            name, label = (key[4:], "validation") if key.startswith("val_") else (key, "epoch end")
            ends = self.epoch_ends[-len(values):]
            curves.setdefault(name, {})[label] = (ends, values)
        if self.learning_rates:
            curves["learning rate"] = {"schedule": (self.steps, self.learning_rates)}
        return _draw(curves, "step", None, None)

    def save(self):
        """Writes the picture now (nothing before the first step)."""
        if self.steps:
            save_figure(self.figure(), self.path)
            self._saved_at, self._saved = time.monotonic(), self._recorded()

    def get_config(self):
        return {"path": str(self.path), "every_seconds": self.every_seconds}


def _learning_rate_schedule(optimizer):
    """A function step -> learning rate from the optimizer's config (a
    schedule or a constant); None when there is no optimizer."""
    if optimizer is None:
        return None
    rate = optimizer.get_config().get("learning_rate")
    if isinstance(rate, dict):
        schedule = keras.optimizers.schedules.deserialize(rate)
        return lambda step: float(keras.ops.convert_to_numpy(schedule(step)))
    return lambda step: float(rate)


def _draw(curves, x_label, path, title):
    """One panel per quantity, each series a line (markers when few points)."""
    if not curves:
        raise ValueError("No training curve to draw yet: call this after at least one training step.")
    columns = min(3, len(curves))
    rows = -(-len(curves) // columns)
    figure = new_figure(4.2 * columns, 3.0 * rows)
    grid = figure.subplots(rows, columns, squeeze=False).ravel()
    for axes, (name, series) in zip(grid, curves.items()):
        for label, (x, y) in series.items():
            axes.plot(x, y, marker="o" if len(y) <= 30 else None, markersize=3, label=label,
                      linewidth=1.0 if "so far" in label else 1.6)
        axes.set_title(name)
        axes.set_xlabel(x_label)
        axes.grid(alpha=0.3)
        if len(series) > 1:
            axes.legend(fontsize=7)
    for axes in grid[len(curves):]:
        figure.delaxes(axes)
    if title:
        figure.suptitle(title)
    if path is not None:
        save_figure(figure, path)
    return figure
