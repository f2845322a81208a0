"""The TensorFlow side of fine-tuning inputs (BERT sec. 3.2, sec. 4): raw text
in memory or in a `tf.data.Dataset`, packed by a task's preprocessor outside
the compiled model, and integer labels checked before the first step.

`kzoo.models.bert.BertTask` calls these so that the model code stays
backend-agnostic (`keras` only); preprocessing is TensorFlow on the CPU for
every backend.
"""

import keras
import numpy as np
import tensorflow as tf
import tqdm

PREPROCESSING_CHUNK = 4096  # texts packed per eager preprocessor call


def is_dataset(value):
    """Whether `value` is a `tf.data.Dataset`.

    Example:

    >>> is_dataset(tf.data.Dataset.range(3)), is_dataset([1, 2])
    (True, False)
    """
    return isinstance(value, tf.data.Dataset)


# `keras.Model.fit(x, y, batch_size, epochs, verbose, callbacks, validation_split,
# validation_data, shuffle, ...)`: shuffle's index among the arguments after x and y.
_FIT_SHUFFLE_INDEX = 6


def fit_keywords_for(x, args, kwargs):
    """`fit`'s keyword arguments, with `shuffle=False` when `x` is a
    `tf.data.Dataset` and the caller left `shuffle` at Keras' default `True`:
    a dataset shuffles itself, and Keras ignores `shuffle` for it with a
    warning the caller never caused (`shuffle=True` given explicitly still warns).

    Example:

    >>> fit_keywords_for(tf.data.Dataset.range(3), (), {"epochs": 2})
    {'epochs': 2, 'shuffle': False}
    >>> fit_keywords_for([1, 2], (), {})
    {}
    """
    if is_dataset(x) and len(args) <= _FIT_SHUFFLE_INDEX and "shuffle" not in kwargs:
        return {**kwargs, "shuffle": False}
    return kwargs


def _to_tensor(value):
    """A `tf.Tensor` (or `tf.RaggedTensor` for lists of unequal lists)."""
    if isinstance(value, (tf.Tensor, tf.RaggedTensor)):
        return value
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], (list, tuple, np.ndarray)):
        if len({len(row) for row in value}) > 1:
            return tf.ragged.constant([list(row) for row in value])
    array = np.asarray(value)
    if array.dtype == object or array.dtype.kind == "U":
        array = array.astype(str).astype(object)
    return tf.constant(array)


def to_tensors(value):
    """Raw inputs or labels as TF tensors: a tuple of columns (e.g. sentence
    pairs) stays a tuple; lists of unequal lists become ragged; None stays None.

    Example:

    >>> to_tensors((["a b", "c"], ["d", "e f"]))[1].numpy().tolist()
    [b'd', b'e f']
    >>> to_tensors([[1, 2], [3]]).to_list()
    [[1, 2], [3]]
    """
    if value is None:
        return None
    if isinstance(value, tuple):
        return tuple(_to_tensor(v) for v in value)
    return _to_tensor(value)


def num_rows(value):
    """Number of examples in a tensor or a tuple of tensors (from `to_tensors`).

    Example:

    >>> num_rows(to_tensors((["a", "b"], ["c", "d"])))
    2
    """
    first = value[0] if isinstance(value, tuple) else value
    return int(first.nrows()) if isinstance(first, tf.RaggedTensor) else int(first.shape[0])


def rows(value, start, stop):
    """Rows `start:stop` of a tensor, a tuple of tensors, or None.

    Example:

    >>> rows(to_tensors((["a", "b", "c"], ["d", "e", "f"])), 1, 3)[1].numpy().tolist()
    [b'e', b'f']
    """
    if value is None:
        return None
    if isinstance(value, tuple):
        return tuple(rows(v, start, stop) for v in value)
    return value[start:stop]


def split_rows(value, fraction):
    """`(first, last)`: the last `fraction` of the rows held out, as Keras'
    `validation_split` does, for a tensor, a tuple of tensors or None.

    Example:

    >>> train, held_out = split_rows(to_tensors(["a", "b", "c", "d"]), 0.25)
    >>> held_out.numpy().tolist()
    [b'd']
    """
    if value is None:
        return None, None
    cut = int(num_rows(value) * (1.0 - fraction))
    return rows(value, 0, cut), rows(value, cut, None)


def pack_in_memory(preprocessor, x, y=None, sample_weight=None):
    """`preprocessor(x, y, sample_weight)` on texts in memory, as NumPy.

    Runs in eager TensorFlow, one vectorised call per chunk of 4096 texts
    (a progress bar beyond one chunk): much faster than tracing a `tf.data`
    map for every `fit`/`predict` call.

    Example:

    >>> pack = lambda x, y=None, w=None: (tf.strings.length(x), y, w)
    >>> pack_in_memory(pack, to_tensors(["ab", "c"]))[0].tolist()
    [2, 1]
    """
    length = num_rows(x)
    starts = range(0, length, PREPROCESSING_CHUNK)
    chunks = []
    for start in tqdm.tqdm(starts, desc="Preprocessing", unit="chunk", disable=len(starts) < 2):
        part = [rows(value, start, start + PREPROCESSING_CHUNK) for value in (x, y, sample_weight)]
        packed = keras.utils.unpack_x_y_sample_weight(preprocessor(*part))
        chunks.append(keras.tree.map_structure(lambda t: None if t is None else np.asarray(t), packed))
    if len(chunks) == 1:
        return chunks[0]
    return keras.tree.map_structure(lambda *parts: None if parts[0] is None else np.concatenate(parts), *chunks)


def map_dataset(dataset, preprocess):
    """`dataset` mapped by `preprocess(x, y, sample_weight)` in parallel, prefetched.

    Example:

    >>> data = tf.data.Dataset.from_tensor_slices(([1, 2], [3, 4])).batch(2)
    >>> next(iter(map_dataset(data, lambda x, y, w: (x * 10, y))))[0].numpy().tolist()
    [10, 20]
    """

    def unpacked(*element):
        return preprocess(*keras.utils.unpack_x_y_sample_weight(element))

    return dataset.map(unpacked, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def label_range(labels):
    """`(lowest, highest)` of in-memory integer labels (the first column of a
    tuple), None when there are none; a `ValueError` for labels that are not
    integers (class names, fractions).

    Example:

    >>> label_range(to_tensors([[0, 2], [1]]))
    (0, 2)
    """
    if labels is None:
        return None
    labels = labels[0] if isinstance(labels, tuple) else labels
    values = labels.flat_values if isinstance(labels, tf.RaggedTensor) else labels
    values = np.asarray(values)
    if values.size == 0:
        return None
    if values.dtype.kind not in "iuf" or (values.dtype.kind == "f" and not np.all(np.mod(values, 1) == 0)):
        raise ValueError(
            "Labels must be integer class ids; got values such as "
            f"{values.ravel()[:3].tolist()}. Map class names to ids (0, 1, ...) first."
        )
    return int(values.min()), int(values.max())


def assert_labels_in(labels, bounds, message):
    """`labels` (the first column of a tuple checked) with TF assertions that
    every value lies in `[bounds[0], bounds[1])`, for use inside `tf.data`: a
    bad batch fails with `message` when it is reached.

    Example:

    >>> assert_labels_in(tf.constant([0, 1]), (0, 2), "labels in [0, 1]").numpy().tolist()
    [0, 1]
    """
    first = labels[0] if isinstance(labels, tuple) else labels
    values = first.flat_values if isinstance(first, tf.RaggedTensor) else first
    values = tf.cast(values, tf.int64)
    checks = [
        tf.debugging.assert_greater_equal(values, tf.cast(bounds[0], tf.int64), message=message),
        tf.debugging.assert_less(values, tf.cast(bounds[1], tf.int64), message=message),
    ]
    with tf.control_dependencies(checks):
        return tf.nest.map_structure(tf.identity, labels)


def is_batched_text(spec):
    """Whether a dataset's `element_spec` holds batches (not single texts).

    Example:

    >>> is_batched_text(tf.data.Dataset.from_tensor_slices(["a", "b"]).element_spec)
    False
    """
    x_spec = spec[0] if isinstance(spec, tuple) else spec
    first = x_spec[0] if isinstance(x_spec, tuple) else x_spec
    return getattr(first, "shape", None) is None or first.shape.rank != 0


def known_length(dataset):
    """The number of batches in `dataset`, None when TF cannot tell (infinite
    or unknown cardinality).

    Example:

    >>> known_length(tf.data.Dataset.range(10).batch(4))
    3
    """
    cardinality = int(dataset.cardinality())
    return cardinality if cardinality > 0 else None
