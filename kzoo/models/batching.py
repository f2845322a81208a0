"""Examples in memory fed to Keras in batches grouped by length, each padded
only as far as its longest text needs (`kzoo.data.padding_ladder`), in an
order that depends only on `(seed, epoch)`: `fit` draws `seed` from NumPy's
global generator and tells the data its epoch (`LengthBatches.set_epoch`),
so a `fit` resumed by `keras.callbacks.BackupAndRestore` sees the
uninterrupted one's batches (Keras' own shuffle would draw epoch 0's again).
"""

import keras
import numpy as np
import tensorflow as tf
import tqdm

from kzoo import backend
from kzoo.backend import tensorflow as tensorflow_backend
from kzoo.data.padding_ladder import (
    cut_to, length_batches, length_ladder, text_lengths,
)
from kzoo.models.input_checks import num_rows, rows as row_range

IN_MEMORY = (str, bytes, list, tuple, np.ndarray, tf.Tensor, tf.RaggedTensor)
PACKING_CHUNK = 4096  # texts per eager call of the preprocessor


class LengthBatches(keras.utils.PyDataset):
    """Packed examples in memory (`x`, a dict of NumPy arrays; `y` and
    `sample_weight` alike or None) in batches of `batch_size` grouped by length,
    each cut to the rung of the ladder (`kzoo.data.length_ladder`, few lengths
    when `compiled`, else any multiple of 8) that holds its longest text, with
    `padding="longest"` (needs `x["padding_mask"]`). `order`: `"given"`,
    `"by_length"` (`predict`, `evaluate`) or `"shuffled"` (`fit`: random
    batches of similar lengths drawn from `(seed, epoch)`). `labels_per_token`:
    `y` and `sample_weight` have a sequence axis to cut too.

    Example:

    >>> mask = np.array([[1] * n + [0] * (64 - n) for n in (40, 3, 9, 35)])
    >>> data = LengthBatches({"token_ids": mask * 7, "padding_mask": mask}, np.arange(4), batch_size=2)
    >>> [(batch[0]["token_ids"].shape, batch[1].tolist()) for batch in data]
    [((2, 16), [1, 2]), ((2, 64), [3, 0])]
    """

    def __init__(self, x, y=None, sample_weight=None, batch_size=32, order="by_length", padding="longest",
                 labels_per_token=False, seed=0, compiled=True):
        super().__init__()
        self.arrays = keras.tree.map_structure(_to_numpy, (x, y, sample_weight))
        self.batch_size, self.order, self.seed = batch_size, order, seed
        self.labels_per_token = labels_per_token
        mask = x.get("padding_mask") if padding == "longest" else None
        self.lengths = np.zeros(len(keras.tree.flatten(x)[0]), "int32") if mask is None else text_lengths(mask)
        self.max_length = None if mask is None else mask.shape[-1]
        self.ladder = None if mask is None else length_ladder(self.max_length, compiled=compiled)
        # Training groups by rung only: within one, examples stay in random order.
        self.rungs = self.lengths if mask is None else np.searchsorted(self.ladder, self.lengths)
        self.set_epoch(0)

    def set_epoch(self, epoch, logs=None):
        """Batches the examples as epoch `epoch` (0-based): `on_epoch_begin` of a
        `keras.callbacks.LambdaCallback`, so that a resumed `fit` begins at its epoch."""
        keys = self.rungs if self.order == "shuffled" else self.lengths
        self.batches = length_batches(keys, self.batch_size, self.order, self.seed, epoch)

    def __len__(self):
        return len(self.batches)

    def __getitem__(self, index):
        return self.batch(self.batches[index])

    def batch(self, rows):
        """The examples `rows` as a batch, its padding cut to its ladder length."""
        x, y, sample_weight = keras.tree.map_structure(lambda a: None if a is None else a[rows], self.arrays)
        if self.max_length is not None:
            length = self.ladder[int(self.rungs[rows].max(initial=0))]  # the rung that holds the longest
            x, y, sample_weight = cut_to(length, x, y, sample_weight, self.labels_per_token)
        return (x,) if y is None else (x, y) if sample_weight is None else (x, y, sample_weight)

    def for_keras(self):
        """Keras' `x`, `y`, `sample_weight`, `batch_size` for these batches (`backend.variable_length_batches`)."""
        return {"x": backend.variable_length_batches(self), "y": None, "sample_weight": None, "batch_size": None}


def packed(preprocessor, x, y=None, sample_weight=None):
    """`(inputs, labels, sample_weight)` as NumPy: examples in memory (tensors
    from `to_tensors`) packed by `preprocessor`, one call per `PACKING_CHUNK`
    examples (a progress bar beyond one); texts alone, once the preprocessor
    says it pays (`Preprocessor._traces_texts`), through one `tf.function` traced
    per preprocessor and settings."""
    traced = y is None and sample_weight is None and preprocessor._traces_texts()
    chunks = []
    starts = range(0, int(keras.tree.flatten(x)[0].shape[0]), PACKING_CHUNK)  # tensors (ragged too): rows known
    for start in tqdm.tqdm(starts, desc="Preprocessing", unit="chunk", disable=len(starts) < 2):
        stop = start + PACKING_CHUNK
        part = row_range(x, start, stop), row_range(y, start, stop), row_range(sample_weight, start, stop)
        outputs = _traced(preprocessor, part[0]) if traced else preprocessor.call(*part)
        chunks.append(keras.tree.map_structure(_to_numpy, keras.utils.unpack_x_y_sample_weight(outputs)))
    if len(chunks) == 1:
        return chunks[0]
    return keras.tree.map_structure(lambda *parts: None if parts[0] is None else np.concatenate(parts), *chunks)


def _call(preprocessor, settings, x):
    # One trace per preprocessor, settings and structure of `x` (TensorFlow's cache).
    return preprocessor.call(x)


# tf.data code on every backend; each preprocessor's traces counted apart (no retracing warning).
_traced_call = tensorflow_backend.without_retracing_warning(tf.function(_call, autograph=False))


def _traced(preprocessor, x):
    # Traced for any number of rows from the first trace, not again when the row count changes.
    settings = (preprocessor.tokenizer, getattr(preprocessor, "sequence_length", None))
    specs = keras.tree.map_structure(
        lambda t: tf.RaggedTensorSpec([None] * t.shape.rank, t.dtype, t.ragged_rank, t.row_splits.dtype)
        if isinstance(t, tf.RaggedTensor) else tf.TensorSpec([None] * t.shape.rank, t.dtype), x)
    return _traced_call.get_concrete_function(preprocessor, settings, specs)(preprocessor, settings, x)


def _to_numpy(value):
    return None if value is None else value.numpy() if hasattr(value, "numpy") else np.asarray(value)


def joined(data, symbolic, *parts):
    """One output of `predict` on `data`'s batches (`parts`, each batch's) as
    one array in the caller's order, 0 beyond a batch's padded length along the
    axes `symbolic` (the output in the graph) leaves unknown."""
    sizes = zip(symbolic.shape[1:], parts[0].shape[1:])  # the graph's (None: cut by length), the part's
    shape = [len(data.lengths)] + [data.max_length if size is None and data.max_length else n for size, n in sizes]
    result = np.zeros(shape, parts[0].dtype)
    for rows, part in zip(data.batches, parts):
        result[(rows, *map(slice, part.shape[1:]))] = part
    return result


# === What `fit` does beside: held-out examples, validation data ===


def held_out(x, y, sample_weight, fraction, owner):
    """`(x, y, sample_weight, validation_data)`: the last `fraction` of the
    examples held out as Keras' `validation_split` holds them (before
    shuffling; raw text and label names too), validation_data None for 0.
    `ValueError`s, before any work, for a fraction that is not a number in
    [0, 1), data not in memory, or a cut that leaves no example on one side."""
    number = isinstance(fraction, (int, float, np.integer, np.floating)) and not isinstance(fraction, (bool, np.bool_))
    if not (number and 0 <= fraction < 1):
        raise ValueError(
            f"{owner}: validation_split must be a number in [0, 1), the fraction of the examples held "
            f"out (the last ones, as Keras does); got {fraction!r} ({type(fraction).__name__})."
        )
    if not fraction:
        return x, y, sample_weight, None
    rows = num_rows(x, owner) if isinstance(x, (dict, *IN_MEMORY)) and not isinstance(x, (str, bytes)) else None
    if rows is None:
        raise ValueError(
            f"{owner}: validation_split cuts examples in memory (lists, arrays, tensors); got "
            f"{type(x).__name__}, which cannot be cut before it is read. Hold out batches yourself "
            "(e.g. dataset.take(n) for validation_data= and dataset.skip(n) for training)."
        )
    cut = int(rows * (1.0 - fraction))
    if cut == 0 or cut == rows:
        raise ValueError(
            f"{owner}: validation_split={fraction} of {rows} examples leaves 0 for "
            f"{'training' if cut == 0 else 'validation'}. Give more examples or another fraction."
        )
    held = row_range(x, cut, None), row_range(y, cut, None), row_range(sample_weight, cut, None)
    return row_range(x, 0, cut), row_range(y, 0, cut), row_range(sample_weight, 0, cut), held


def validation_tuple(validation_data, y, owner):
    """`validation_data` (not a tuple) as `(x,)`; a `ValueError` for examples without labels where `y` has some."""
    if y is not None and isinstance(validation_data, IN_MEMORY):
        raise ValueError(
            f"{owner}: the training examples have labels but validation_data has "
            f"none (got a {type(validation_data).__name__}). Pass validation_data=(x_val, y_val) "
            "as a tuple; a list is read as examples."
        )
    return (validation_data,)
