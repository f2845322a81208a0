"""Checkpoint averaging ("Attention Is All You Need", sec. 6.1).

"For the base models, we used a single model obtained by averaging the last 5
checkpoints, which were written at 10-minute intervals. For the big models, we
averaged the last 20 checkpoints." (tensor2tensor's `avg_checkpoints.py`.)

`average_checkpoints` sets a model's weights to the element-wise mean of
`.weights.h5` files; `CheckpointAveraging` writes such files during `fit` and
averages the last ones when training ends.
"""

import os
import tempfile
import time

import h5py
import keras
import numpy as np

OPTIMIZER_GROUP = "optimizer/"


def _model_entries(weights_file):
    """The model's (not the optimizer's) arrays in an open `.weights.h5` file, by h5 path."""
    entries = {}

    def visit(name, item):
        if isinstance(item, h5py.Dataset) and not name.startswith(OPTIMIZER_GROUP):
            entries[name] = item

    weights_file.visititems(visit)
    return entries


def _check_same_variables(path, entries, model_entries):
    missing = sorted(set(model_entries) - set(entries))
    extra = sorted(set(entries) - set(model_entries))
    if missing or extra:
        raise ValueError(
            f"Checkpoint {path} does not hold the model's variables: missing {missing[:5]}, "
            f"not in the model {extra[:5]} (h5 paths; {len(missing)} missing, {len(extra)} extra). "
            "Average checkpoints saved from this same architecture (and build the model first)."
        )
    for name, entry in entries.items():
        if entry.shape != model_entries[name].shape:
            raise ValueError(
                f"Checkpoint {path}: variable {name} has shape {entry.shape}, the model's has "
                f"{model_entries[name].shape}. Average checkpoints of this same architecture."
            )


def average_checkpoints(model, paths):
    """Sets `model`'s weights to the element-wise mean of checkpoints (sec. 6.1).

    Every floating-point variable of the model becomes the mean of its values
    in the `.weights.h5` files at `paths` (written by `model.save_weights`).
    Integer variables (counters, random-seed states) and the optimizer's
    state keep the model's current values. Each checkpoint must hold exactly
    the model's variables with the same shapes; otherwise a `ValueError` names
    the file and the variable (its path in the h5 file, e.g.
    `layers/dense/vars/0`) before anything is changed.

    Args:
        model: `keras.Model`. A built model.
        paths: list of str or `os.PathLike`. The `.weights.h5` files to
            average (the paper: the last 5 checkpoints for base models, the
            last 20 for big ones).

    Example:

    >>> import os, tempfile
    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    >>> directory = tempfile.mkdtemp()
    >>> paths = [os.path.join(directory, f"{k}.weights.h5") for k in range(3)]
    >>> for k, path in enumerate(paths):
    ...     model.set_weights([np.full((1, 1), k, "float32"), np.full((1,), 10.0 * k, "float32")])
    ...     model.save_weights(path)
    >>> average_checkpoints(model, paths)
    >>> [w.tolist() for w in model.get_weights()]  # means of 0, 1, 2 and 0, 10, 20
    [[[1.0]], [10.0]]
    """
    paths = [os.fspath(path) for path in paths]
    if not paths:
        raise ValueError("average_checkpoints needs at least one checkpoint path; got none.")
    for path in paths:
        if not path.endswith(".weights.h5") or not os.path.isfile(path):
            raise ValueError(
                f"Checkpoint {path} is not an existing `.weights.h5` file; write checkpoints "
                "with model.save_weights('name.weights.h5') (or the CheckpointAveraging callback)."
            )
    with tempfile.TemporaryDirectory() as directory:
        averaged_path = os.path.join(directory, "averaged.weights.h5")
        model.save_weights(averaged_path)  # the model's own layout, filled in below
        with h5py.File(averaged_path, "r+") as averaged:
            model_entries = _model_entries(averaged)
            floats = {name: e for name, e in model_entries.items() if np.issubdtype(e.dtype, np.floating)}
            sums = {name: np.zeros(entry.shape, "float64") for name, entry in floats.items()}
            for path in paths:
                with h5py.File(path, "r") as checkpoint:
                    entries = _model_entries(checkpoint)
                    _check_same_variables(path, entries, model_entries)
                    for name in floats:
                        sums[name] += entries[name][()]
            for name, entry in floats.items():
                entry[...] = (sums[name] / len(paths)).astype(entry.dtype)
        model.load_weights(averaged_path)


class CheckpointAveraging(keras.callbacks.Callback):
    """Writes checkpoints during `fit`, keeps the last few, and averages them at the end (sec. 6.1).

    The paper writes a checkpoint every 10 minutes and evaluates the average
    of the last 5 (base) or 20 (big). This callback saves
    `model.save_weights(directory/step-XXXXXXXX.weights.h5)` every
    `every_n_steps` training steps, or, when `every_n_steps` is `None`, at the
    first step after `every_seconds` have passed since the last save. It
    deletes its own older files so that only the last `keep` remain
    (`checkpoints` lists them, oldest first). When training ends it saves the
    final weights too (unless they were just saved) and, with
    `average_at_end=True`, loads the average of the last `keep` checkpoints
    into the model with `average_checkpoints`. Step numbers continue across
    `fit` calls with the same callback.

    Args:
        directory: str or `os.PathLike`. Where to write checkpoints
            (created if missing).
        every_n_steps: int or None. Save every this many training steps;
            overrides `every_seconds`. Defaults to `None`.
        every_seconds: float. Save at most this often, in seconds, when
            `every_n_steps` is `None`. Defaults to `600`, the paper's 10 minutes.
        keep: int. How many of the latest checkpoints to keep and average (5
            base, 20 big). Defaults to `5`.
        average_at_end: bool. Whether to load the average of the kept
            checkpoints into the model when `fit` ends. Defaults to `True`.

    Example:

    >>> import tempfile
    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> averaging = CheckpointAveraging(tempfile.mkdtemp(), every_n_steps=2, keep=3)
    >>> x, y = np.ones((8, 1), "float32"), np.zeros((8, 1), "float32")
    >>> _ = model.fit(x, y, batch_size=1, epochs=1, callbacks=[averaging], verbose=0)
    >>> [os.path.basename(path) for path in averaging.checkpoints]
    ['step-00000004.weights.h5', 'step-00000006.weights.h5', 'step-00000008.weights.h5']
    """

    def __init__(self, directory, every_n_steps=None, every_seconds=600, keep=5, average_at_end=True):
        super().__init__()
        if every_n_steps is not None and every_n_steps < 1:
            raise ValueError(f"every_n_steps={every_n_steps} must be a positive number of steps, or None.")
        if every_n_steps is None and (every_seconds is None or every_seconds <= 0):
            raise ValueError(
                f"every_seconds={every_seconds} must be positive when every_n_steps is None "
                "(the paper saves every 600 seconds)."
            )
        if keep < 1:
            raise ValueError(f"keep={keep} must be at least 1 (the paper averages 5, or 20 for big models).")
        self.directory = os.fspath(directory)
        self.every_n_steps = every_n_steps
        self.every_seconds = every_seconds
        self.keep = keep
        self.average_at_end = average_at_end
        self.checkpoints = []
        self._step = 0
        self._saved_step = None
        self._saved_time = None

    def on_train_begin(self, logs=None):
        os.makedirs(self.directory, exist_ok=True)
        self._saved_time = time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
        self._step += 1
        if self.every_n_steps is not None:
            due = self._step % self.every_n_steps == 0
        else:
            due = time.monotonic() - self._saved_time >= self.every_seconds
        if due:
            self._save()

    def on_train_end(self, logs=None):
        if self._step != self._saved_step:
            self._save()
        if self.average_at_end:
            average_checkpoints(self.model, self.checkpoints)

    def _save(self):
        path = os.path.join(self.directory, f"step-{self._step:08d}.weights.h5")
        self.model.save_weights(path)
        self.checkpoints.append(path)
        self._saved_step, self._saved_time = self._step, time.monotonic()
        while len(self.checkpoints) > self.keep:
            os.remove(self.checkpoints.pop(0))
