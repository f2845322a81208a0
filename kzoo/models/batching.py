"""Examples in memory fed to Keras in batches grouped by length, each padded
only as far as its longest text needs (`kzoo.data.padding_ladder`), in an
order that depends only on `(seed, epoch)`.

Keras shuffles arrays in memory from a random state that lives only in the
running process, drawn once per epoch: a `fit` resumed at epoch k by
`keras.callbacks.BackupAndRestore` would draw epoch 0's order again. Here
epoch k's batches come from `(seed, k)` (`length_batches`), and `LengthBatches.set_epoch`
tells the data which epoch Keras is in; `seed` is drawn from NumPy's global
generator when `fit` starts, so a script seeded with
`keras.utils.set_random_seed` gets the same batches when it is run again to resume.

What it buys: on real short texts, fine-tuning 1.85x (TensorFlow) to 2.20x
(torch) Hugging Face's examples per second, where padding every batch to the
sequence length was 0.46x on torch (benchmarks/real_text.py, 2026-11-27, AMD
EPYC, 2 cores); and a resumed `fit` that sees the uninterrupted one's batches.
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
    """Packed examples in memory, batched by length (BERT sec. 3 packing,
    padding cut to a rung of the ladder per batch).

    Args:
        x: dict of NumPy arrays. Packed inputs, one row per example.
        y: array, tuple/dict of arrays, or None. The labels. Defaults to `None`.
        sample_weight: array or None. Per-example weights. Defaults to `None`.
        batch_size: int. Examples per batch (the last one may be smaller). Defaults to `32`.
        order: str. `"given"`, `"by_length"` (for `predict`/`evaluate`) or
            `"shuffled"` (for `fit`: random batches of similar lengths,
            drawn from `(seed, epoch)`). Defaults to `"by_length"`.
        padding: str. `"longest"`: each batch cut to the ladder length at or
            above its longest text (needs `x["padding_mask"]`); `"max_length"`:
            as packed. Defaults to `"longest"`.
        labels_per_token: bool. Whether `y` and `sample_weight` have a
            sequence axis to cut too (token classification). Defaults to `False`.
        seed: int. The seed of `"shuffled"`. Defaults to `0`.
        compiled: bool. Whether the model compiles a step per shape (XLA,
            `jax.jit`): the lengths are then few (`kzoo.data.length_ladder`);
            otherwise any multiple of 8. Defaults to `True`.

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
        self.size = len(keras.tree.flatten(x)[0])
        self.batch_size, self.order, self.seed = batch_size, order, seed
        self.labels_per_token = labels_per_token
        mask = x.get("padding_mask") if padding == "longest" else None
        self.lengths = np.zeros(self.size, "int32") if mask is None else text_lengths(mask)
        self.max_length = None if mask is None else mask.shape[-1]
        self.ladder = None if mask is None else length_ladder(self.max_length, compiled=compiled)
        # Training groups by rung only: within one, examples stay in random order.
        self.rungs = self.lengths if mask is None else np.searchsorted(self.ladder, self.lengths)
        self.set_epoch(0)

    def set_epoch(self, epoch, logs=None):
        """Batches the examples as epoch `epoch` (0-based, as Keras counts);
        a `keras.callbacks.LambdaCallback`'s `on_epoch_begin` (`logs` unused),
        so that a resumed `fit` begins at the epoch it resumes.

        Example:

        >>> data = LengthBatches({"ids": np.arange(4)}, batch_size=4, order="shuffled", seed=0)
        >>> data.set_epoch(2)
        >>> sorted(data.batches[0].tolist())
        [0, 1, 2, 3]
        """
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

    def signature(self):
        """The batches' `tf.TensorSpec`s, every axis unknown (batches differ in size and length)."""
        return keras.tree.map_structure(lambda a: tf.TensorSpec([None] * a.ndim, tf.as_dtype(a.dtype)), self[0])

    def for_keras(self):
        """`keras.Model.fit`/`evaluate`/`predict`'s `x`, `y`, `sample_weight`
        and `batch_size` for these batches: this dataset, with their varying
        lengths declared to TensorFlow's pipeline
        (`kzoo.backend.variable_length_batches`); `predict` runs a single
        batch by itself."""
        return {"x": backend.variable_length_batches(self), "y": None, "sample_weight": None, "batch_size": None}


def packed(preprocessor, x, y=None, sample_weight=None):
    """`(inputs, labels, sample_weight)` as NumPy: examples in memory (tensors
    from `to_tensors`, a tuple for e.g. sentence pairs) packed by
    `preprocessor` to its `sequence_length` (a task cuts the padding batch by
    batch), one vectorised call per 4096 examples (a progress bar beyond one). Texts alone go through one
    `tf.function` that TensorFlow traces once per preprocessor and settings:
    0.7 ms instead of 35 ms for one text.

    Example:

    >>> from kzoo import BertPreprocessor, BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"])
    >>> from kzoo.models.input_checks import to_tensors
    >>> x, y, _ = packed(BertPreprocessor(tokenizer, 4), to_tensors(["hi", "hi hi"]), to_tensors([0, 1]))
    >>> x["token_ids"].tolist(), y.tolist()
    ([[2, 5, 3, 0], [2, 5, 5, 3]], [0, 1])
    """
    traced = preprocessor.traceable and y is None and sample_weight is None
    settings = (preprocessor.tokenizer, getattr(preprocessor, "sequence_length", None))
    chunks = []
    starts = range(0, int(keras.tree.flatten(x)[0].shape[0]), PACKING_CHUNK)  # tensors (ragged too): rows known
    for start in tqdm.tqdm(starts, desc="Preprocessing", unit="chunk", disable=len(starts) < 2):
        stop = start + PACKING_CHUNK
        part = row_range(x, start, stop), row_range(y, start, stop), row_range(sample_weight, start, stop)
        outputs = _traced_call(preprocessor, settings, part[0]) if traced else preprocessor.call(*part)
        chunks.append(keras.tree.map_structure(_to_numpy, keras.utils.unpack_x_y_sample_weight(outputs)))
    if len(chunks) == 1:
        return chunks[0]
    return keras.tree.map_structure(lambda *parts: None if parts[0] is None else np.concatenate(parts), *chunks)


def _call(preprocessor, settings, x):
    # One trace per preprocessor, settings and structure of `x` (TensorFlow's cache).
    return preprocessor.call(x)


# tf.data code on every backend; each preprocessor's traces counted apart (no retracing warning).
_traced_call = tensorflow_backend.without_retracing_warning(tf.function(_call, reduce_retracing=True, autograph=False))


def _to_numpy(value):
    return None if value is None else value.numpy() if hasattr(value, "numpy") else np.asarray(value)


def joined(batches, length, symbolic, *parts):
    """One output of `predict`'s batches as one NumPy array in the caller's
    order, 0 beyond a batch's padded length along the axes the functional
    graph leaves unknown (besides the batch axis): those along the sequence.

    Args:
        batches: list of int arrays. The examples of each batch (`LengthBatches.batches`).
        length: int or None. The packed length; None: the batches were not cut.
        symbolic: `keras.KerasTensor`. The output in the graph (`model.output`).
        *parts: NumPy arrays. The output of each batch.

    Example:

    >>> joined([np.array([1]), np.array([0, 2])], 3, keras.KerasTensor((None, None)), np.ones((1, 1)), np.ones((2, 2)))
    array([[1., 1., 0.],
           [1., 0., 0.],
           [1., 1., 0.]])
    """
    shape = list(parts[0].shape)
    for axis in range(1, len(shape)):
        if symbolic.shape[axis] is None and length is not None:
            shape[axis] = length
    shape[0] = sum(map(len, batches))
    result = np.zeros(shape, parts[0].dtype)
    for rows, part in zip(batches, parts):
        result[(rows, *map(slice, part.shape[1:]))] = part
    return result


# === What `fit` does beside: held-out examples, validation data ===


def held_out(x, y, sample_weight, fraction, owner):
    """`(x, y, sample_weight, validation_data)`: the last `fraction` of the
    examples held out as Keras' `validation_split` holds them (before
    shuffling; raw text and label names too); validation_data is None for 0.
    `ValueError`s, before any work, for a fraction that holds out nothing
    usable: not a number in [0, 1), data not in memory (a dataset or
    generator, which cannot be cut before it is read), or a cut that leaves
    no example on one side.

    Example:

    >>> held_out(["a", "b", "c", "d"], [0, 1, 0, 1], None, 0.25, "BertClassifier")
    (['a', 'b', 'c'], [0, 1, 0], None, (['d'], [1], None))
    >>> held_out(["a", "b", "c", "d"], None, None, 0.9, "BertClassifier")
    Traceback (most recent call last):
    ...
    ValueError: BertClassifier: validation_split=0.9 of 4 examples leaves 0 for training. ...
    """
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
    """`validation_data` (not a tuple) as a tuple `(x,)`; a `ValueError`
    for examples without labels where the training ones have some (a list
    of texts is examples, not `[x, y]`).

    Example:

    >>> validation_tuple(["a text"], None, "BertClassifier")
    (['a text'],)
    """
    if y is not None and isinstance(validation_data, IN_MEMORY):
        raise ValueError(
            f"{owner}: the training examples have labels but validation_data has "
            f"none (got a {type(validation_data).__name__}). Pass validation_data=(x_val, y_val) "
            "as a tuple; a list is read as examples."
        )
    return (validation_data,)
