"""Data checked once, where it comes in, before any compiled step.

Inside a compiled step an out-of-range id cannot always stop the step before
it changes the weights (XLA clamps it on TensorFlow; on JAX the step owns
the weights, see `kzoo.backend.checks`). So kzoo's models check what they are
given before Keras runs a step: packed inputs in memory all at once (a
`ValueError` before the first step), a `tf.data.Dataset` batch by batch in its
pipeline, on the host (`on_host`): the first bad batch stops the run before
its step with the same `ValueError`, kept as raised in a list
that belongs to the call (`refused`) and re-raised by `reported`. The steps themselves then run without checks
(`kzoo.backend.checks.checked_upstream`).
"""

import contextlib

import numpy as np
import tensorflow as tf

from kzoo.backend import checks, keep_state_on_error


def checked(x, limits, refused=None):
    """`x` as `fit`/`evaluate`/`predict` take it, checked against `limits`
    (input name -> `checks.IdsLimit`s / `checks.LengthLimit`s): a dict in
    memory now, a `tf.data.Dataset` of dicts (or of `(dict, labels, ...)`)
    batch by batch, a refused batch's `ValueError` kept in the list `refused`
    for `reported`; anything else as it is.

    Example:

    >>> limits = {"token_ids": [checks.IdsLimit(5, "token ids")]}
    >>> checked({"token_ids": np.array([[1, 2]])}, limits)["token_ids"].tolist()
    [[1, 2]]
    >>> checked({"token_ids": np.array([[1, 5]])}, limits)
    Traceback (most recent call last):
    ...
    ValueError: token ids must lie in [0, 5) (the embedding table has 5 rows), but got values from 1 to 5. ...
    """
    if isinstance(x, dict):
        checks.check_batch(x, limits)
        return x
    if isinstance(x, tf.data.Dataset):
        return checked_dataset(x, limits, [] if refused is None else refused)
    return x


def checked_dataset(dataset, limits, refused):
    """`dataset` (batches of packed dicts, alone or first in a tuple) with
    each batch checked on the host (`checks.check_batch`, naming the batch),
    a refused batch's `ValueError` kept in the list `refused`; other datasets
    as they are.

    Example:

    >>> limits = {"token_ids": [checks.IdsLimit(5, "token ids")]}
    >>> data = tf.data.Dataset.from_tensor_slices({"token_ids": np.array([[1, 2], [3, 7]])}).batch(1)
    >>> next(iter(checked_dataset(data, limits, [])))["token_ids"].numpy().tolist()
    [[1, 2]]
    """
    spec = dataset.element_spec
    features = spec[0] if isinstance(spec, tuple) else spec
    if not isinstance(features, dict) or not set(features) & set(limits):
        return dataset
    names = sorted(set(features) & set(limits))

    def check(index, *values):
        where = f" Found in batch {index} of the dataset (counting from 0)."
        checks.check_batch(dict(zip(names, values)), limits, where)

    def check_element(index, element):
        inputs = element[0] if isinstance(element, tuple) else element
        dense = [_dense(inputs[name]) for name in names]
        inputs = on_host(check, refused, inputs, index, *dense)
        return (inputs, *element[1:]) if isinstance(element, tuple) else inputs

    return dataset.enumerate().map(check_element)


def on_host(check, refused, tensors, *values):
    """`tensors` (a structure) made to wait for `check(*values)`, run on the
    host inside a `tf.data` pipeline; a `ValueError` it raises stops the
    pipeline and goes to the list `refused` (the call's), for `reported` to
    raise as it is.

    Example:

    >>> def positive(values):
    ...     if values.min() < 0:
    ...         raise ValueError("negative")
    >>> on_host(positive, [], tf.constant([1, 2]), tf.constant([1, 2])).numpy().tolist()
    [1, 2]
    """
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


@contextlib.contextmanager
def reported(model, refused=()):
    """Runs a `fit`/`evaluate`/`predict` of `model`: its weights kept on JAX
    (`kzoo.backend.keep_state_on_error`), its steps traced without checks (the
    data was checked where it came in), and a batch refused inside `tf.data`
    raised as the `ValueError` the check raised (the last in `refused`, the
    list the call's datasets were checked with).

    Example:

    >>> import keras
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> with reported(model):
    ...     model.predict(np.ones((1, 2)), verbose=0).shape
    (1, 1)
    """
    try:
        with keep_state_on_error(model), checks.checked_upstream():
            yield
    except tf.errors.OpError:
        if not refused:
            raise
        raise refused[-1] from None
