"""A `tf.data.Dataset` handed to `fit`, `evaluate` or `predict`: packed and
checked batch by batch inside its pipeline (`on_host`: the first bad batch
stops the run before its step with the `ValueError` of examples in memory,
re-raised by `kzoo.backend.checked_upstream`), and read on from where a
backup stopped.
"""

import json
import os

import keras
import numpy as np
import tensorflow as tf

from kzoo import backend
from kzoo.models.input_checks import no_names


def packed(task, dataset, refused):
    """`dataset` (batches of raw text, or of packed dicts, alone or with
    labels and weights) as `task`'s packed batches: the label shape checked
    before any batch is read; text packed by `task`'s preprocessor in the
    pipeline; labels as ids, checked on the host (`labels`)."""
    spec = dataset.element_spec
    features = spec[0] if isinstance(spec, tuple) else spec
    if isinstance(spec, tuple) and len(spec) > 1 and hasattr(spec[1], "shape"):
        task.check_label_shape(spec[1].shape)  # before any batch is read
    if isinstance(features, dict):
        if task.label_bounds(packed=True) is None or not isinstance(spec, tuple) or len(spec) < 2:
            return dataset
        return dataset.map(lambda x, y, *w: (x, labels(task, y, True, refused), *w))
    preprocessor = task._require_preprocessor()
    first = features[0] if isinstance(features, tuple) else features
    if first.shape.rank == 0:
        raise ValueError(
            f"{type(task).__name__} takes batched datasets: call `dataset.batch(32)` first "
            "(fine-tuning runs on batches, e.g. of 16 or 32)."
        )

    def preprocess(*element):
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(element)
        return preprocessor(x, labels(task, y, False, refused), sample_weight)

    return dataset.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def labels(task, y, packed, refused):
    """`y`, the labels of a `tf.data` batch, names as ids, checked against
    `task.label_bounds` on the host (the messages of labels in memory)."""
    if task.label_names_argument:
        names, argument = getattr(task, task.label_names_argument), task.label_names_argument
        y = names_to_ids_in_graph(y, names, argument, type(task).__name__)
    if y is None or task.label_bounds(packed) is None:
        return y
    first = y[0] if isinstance(y, tuple) else y
    values = first.flat_values if isinstance(first, tf.RaggedTensor) else first
    return on_host(lambda found: task._check_labels(found, packed), refused, y, values)


def names_to_ids_in_graph(labels, names, argument, owner):
    """`names_to_ids` inside `tf.data`: string labels (ragged too) as int64 ids,
    with an assertion that fails a batch holding an unknown name (the known
    names in its message); other labels as they are."""
    if labels is None or not isinstance(labels, (tf.Tensor, tf.RaggedTensor)) or labels.dtype != tf.string:
        return labels
    if names is None:
        raise ValueError(no_names(argument, owner, "strings"))
    message = f"{owner} got labels that are none of its {argument}, which are {names!r:.300}. Unknown:"

    def ids(values):
        matches = tf.equal(tf.expand_dims(values, -1), tf.constant(names))  # (..., K)
        known = tf.reduce_any(matches, axis=-1)
        unknown = tf.boolean_mask(tf.reshape(values, [-1]), tf.logical_not(tf.reshape(known, [-1])))
        check = tf.debugging.Assert(tf.reduce_all(known), [message, unknown], summarize=5)
        with tf.control_dependencies([check]):
            return tf.argmax(tf.cast(matches, tf.int32), axis=-1, output_type=tf.int64)

    return tf.ragged.map_flat_values(ids, labels) if isinstance(labels, tf.RaggedTensor) else ids(labels)


def checked(x, limits, refused=None):
    """`x` as `fit`/`evaluate`/`predict` take it, checked against `limits` (input
    name -> `kzoo.backend.IdsLimit`s / `LengthLimit`s, e.g. `backbone.input_limits()`):
    a dict in memory now (a `ValueError`), a `tf.data.Dataset` of dicts (or of
    `(dict, labels, ...)`) batch by batch; anything else as it is.

    Example:

    >>> limits = {"token_ids": [backend.IdsLimit(5, "token ids")]}
    >>> checked({"token_ids": np.array([[1, 5]])}, limits)
    Traceback (most recent call last):
    ...
    ValueError: token ids must lie in [0, 5) (the embedding table has 5 rows), but got values from 1 to 5. ...
    """
    if isinstance(x, dict):
        backend.check_batch(x, limits)
        return x
    if isinstance(x, tf.data.Dataset):
        return checked_dataset(x, limits, [] if refused is None else refused)
    return x


def checked_dataset(dataset, limits, refused):
    """`dataset` (batches of packed dicts, alone or first in a tuple) with each
    batch checked on the host (`backend.check_batch`, naming the batch), a
    refused batch's `ValueError` kept in the list `refused`."""
    spec = dataset.element_spec
    features = spec[0] if isinstance(spec, tuple) else spec
    if not isinstance(features, dict) or not set(features) & set(limits):
        return dataset
    names = sorted(set(features) & set(limits))

    def check(index, *values):
        where = f" Found in batch {index} of the dataset (counting from 0)."
        backend.check_batch(dict(zip(names, values)), limits, where)

    def check_element(index, element):
        inputs = element[0] if isinstance(element, tuple) else element
        dense = [_dense(inputs[name]) for name in names]
        inputs = on_host(check, refused, inputs, index, *dense)
        return (inputs, *element[1:]) if isinstance(element, tuple) else inputs

    return dataset.enumerate().map(check_element)


def on_host(check, refused, tensors, *values):
    """`tensors` made to wait for `check(*values)`, run on the host inside a
    `tf.data` pipeline; a `ValueError` it raises stops the pipeline and goes to
    `refused` for `kzoo.backend.checked_upstream` to raise as it is."""
    def run(*arrays):
        try:
            check(*arrays)
        except ValueError as error:
            refused.append(error)
            return np.bool_(False)
        return np.bool_(True)

    # Raising inside the Python function would make TensorFlow log its traceback.
    passed = tf.numpy_function(run, list(values), tf.bool)
    done = tf.debugging.Assert(passed, ["A batch was refused by kzoo's checks."])
    with tf.control_dependencies([done]):
        return tf.nest.map_structure(tf.identity, tensors)


def _dense(value):
    return value.to_tensor() if isinstance(value, tf.RaggedTensor) else value


def resumed_stream(dataset, callbacks, steps_per_epoch):
    """`dataset` read as one stream over the epochs (`fit` with `steps_per_epoch`),
    after the batches of the epochs a `keras.callbacks.BackupAndRestore` among
    `callbacks` has backed up: a resumed `fit` reads the batches the
    uninterrupted one would read next (a seeded pipeline is the same stream in
    every process)."""
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
