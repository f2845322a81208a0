"""In-memory training data in an order that is a function of the epoch, and
a `tf.data` stream read from where the interrupted run stopped, for
`Task.fit`: a resumed `fit` sees the batches the uninterrupted one saw.

Keras shuffles arrays in memory from a random state that lives only in the
running process (NumPy's global generator on JAX, torch's on torch, a state
inside the `tf.data` pipeline on TensorFlow), drawn once per epoch: a `fit`
resumed at epoch k by `keras.callbacks.BackupAndRestore` draws epoch 0's
order again. Here epoch k's order is a permutation drawn from `(seed, k)`,
and a callback tells the data which epoch Keras is in; `seed` is drawn from
NumPy's global generator when `fit` starts, so a script seeded with
`keras.utils.set_random_seed` (as a reproducible run is) gets the same one
when it is run again to resume.
"""

import json
import os

import keras
import numpy as np


class EpochOrder(keras.utils.PyDataset):
    """Arrays in memory, in batches, in the order of the current epoch.

    Args:
        x: dict of arrays (NumPy or TensorFlow). The inputs, one row per example.
        y: array, dict of arrays or None. The labels. Defaults to `None`.
        sample_weight: array or None. Per-example weights. Defaults to `None`.
        batch_size: int. Examples per batch (the last one may be smaller).
            Defaults to `32`.
        seed: int. With the epoch, the seed of each epoch's permutation.
            Defaults to `0`.

    Example:

    >>> data = EpochOrder({"ids": np.arange(5)}, np.arange(5) * 10, batch_size=2, seed=3)
    >>> len(data), data[0][0]["ids"].shape
    (3, (2,))
    >>> data.set_epoch(1)
    >>> order = np.concatenate([data[i][0]["ids"] for i in range(len(data))])
    >>> sorted(order.tolist()), bool((data[0][1] == data[0][0]["ids"] * 10).all())
    ([0, 1, 2, 3, 4], True)
    >>> again = EpochOrder({"ids": np.arange(5)}, np.arange(5) * 10, batch_size=2, seed=3)
    >>> again.set_epoch(1)
    >>> bool((np.concatenate([again[i][0]["ids"] for i in range(3)]) == order).all())
    True
    """

    def __init__(self, x, y=None, sample_weight=None, batch_size=32, seed=0):
        super().__init__()
        self.arrays = keras.tree.map_structure(_to_numpy, (x, y, sample_weight))
        self.size = len(keras.tree.flatten(self.arrays[0])[0])
        self.batch_size = batch_size
        self.seed = seed
        self.set_epoch(0)

    def set_epoch(self, epoch):
        """Orders the examples as epoch `epoch` (0-based, as Keras counts)."""
        self.order = np.random.default_rng([self.seed, epoch]).permutation(self.size)

    def __len__(self):
        return -(-self.size // self.batch_size)

    def __getitem__(self, index):
        rows = self.order[index * self.batch_size:(index + 1) * self.batch_size]
        x, y, sample_weight = keras.tree.map_structure(lambda a: None if a is None else a[rows], self.arrays)
        return (x,) if y is None else (x, y) if sample_weight is None else (x, y, sample_weight)


def _to_numpy(value):
    return None if value is None else value.numpy() if hasattr(value, "numpy") else np.asarray(value)


def ordered_by_epoch(train, callbacks):
    """`fit`'s in-memory data (`x`, `y`, `sample_weight`, `batch_size`, as
    `Task._prepare` gives them) as an `EpochOrder` seeded from NumPy's global
    generator, and `callbacks` with the `FollowEpochs` that drives it.

    Args:
        train: dict. The `fit` arguments `x` (a dict of arrays), `y`,
            `sample_weight` and `batch_size` (None: 32).
        callbacks: list of `keras.callbacks.Callback` or None. `fit`'s.

    Returns:
        `(train, callbacks)` to pass to `keras.Model.fit` instead (with `shuffle=False`).

    Example:

    >>> train, callbacks = ordered_by_epoch(
    ...     {"x": {"ids": np.arange(6)}, "y": None, "sample_weight": None, "batch_size": 4}, None)
    >>> len(train["x"]), [type(c).__name__ for c in callbacks]
    (2, ['FollowEpochs'])
    """
    data = EpochOrder(train["x"], train["y"], train["sample_weight"], train["batch_size"] or 32,
                      seed=int(np.random.randint(2**31 - 1)))
    return {"x": data, "y": None, "sample_weight": None, "batch_size": None}, [*(callbacks or []), FollowEpochs(data)]


class FollowEpochs(keras.callbacks.Callback):
    """Sets an `EpochOrder`'s epoch as each epoch of `fit` begins (a resumed
    `fit` begins at the epoch it resumes).

    Args:
        data: EpochOrder. The training data of the `fit`.

    Example:

    >>> data = EpochOrder({"ids": np.arange(4)}, batch_size=4, seed=0)
    >>> FollowEpochs(data).on_epoch_begin(2)
    >>> bool((data.order == np.random.default_rng([0, 2]).permutation(4)).all())
    True
    """

    def __init__(self, data):
        super().__init__()
        self.data = data

    def on_epoch_begin(self, epoch, logs=None):
        self.data.set_epoch(epoch)


def resumed_stream(dataset, callbacks, steps_per_epoch):
    """A `tf.data.Dataset` read as one stream over the epochs (`fit` with
    `steps_per_epoch`, e.g. `pretraining_dataset(...).repeat()`), skipping
    the batches of the epochs a `keras.callbacks.BackupAndRestore` among
    `callbacks` has backed up: a resumed `fit` reads the batches the
    uninterrupted one would read next. A pipeline seeded as
    `kzoo.data.pretraining_dataset(..., seed=s)` is is the same stream in
    every process; the skipped batches are computed by the pipeline (no
    training step), which is fast next to training.

    Args:
        dataset: `tf.data.Dataset`. The training batches.
        callbacks: list of `keras.callbacks.Callback` or None. `fit`'s.
        steps_per_epoch: int. Batches per epoch.

    Returns:
        The dataset, or the dataset after the batches already trained on.

    Example:

    >>> import tensorflow as tf
    >>> dataset = tf.data.Dataset.range(100)
    >>> resumed_stream(dataset, None, 10) is dataset  # no backup: from the start
    True
    """
    for callback in callbacks or ():
        if not isinstance(callback, keras.callbacks.BackupAndRestore):
            continue
        path = callback._training_metadata_path  # written with each backup (kzoo.backend's list)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as file:
                finished = int(json.load(file)["epoch"])
            if finished:
                return dataset.skip(finished * int(steps_per_epoch))
    return dataset
