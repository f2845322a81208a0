"""Packed inputs checked on the host before they reach a compiled step.

Inside a compiled `fit`/`evaluate`/`predict` step an out-of-range id cannot
always stop the step before it changes the weights (XLA clamps it on
TensorFlow; on JAX the step owns the weights, see `kzoo.backend.checks`). So
kzoo's models check what they are given before Keras runs a step: packed
inputs in memory all at once (a `ValueError` before the first step), a
`tf.data.Dataset` of packed inputs batch by batch inside the pipeline (which
TensorFlow runs on the host, outside XLA, on every Keras backend): the first
bad batch stops the run before its step, with the eager message naming it.
"""

import contextlib
import re

import tensorflow as tf

from kzoo.backend import checked_before_step, checks, keep_state_on_error

WHERE = " Found in batch {} of the dataset (counting from 0)."
# The text of a failed `checks.assert_batch` inside tf.data (one line).
_ASSERTION = re.compile(r"assertion failed: \[(.*?" + re.escape(WHERE).replace(r"\{\}", r"\d+") + r")\]")


def checked(x, limits):
    """`x` as `fit`/`evaluate`/`predict` take it, checked against `limits`
    (input name -> `checks.IdsLimit`s / `checks.LengthLimit`s): a dict in
    memory now, a `tf.data.Dataset` of dicts (or of `(dict, labels, ...)`)
    batch by batch; anything else as it is.

    Example:

    >>> import numpy as np
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
        return checked_dataset(x, limits)
    return x


def checked_dataset(dataset, limits):
    """`dataset` (batches of packed dicts, alone or first in a tuple) with
    `checks.assert_batch` on each batch, naming it; other datasets as they are.

    Example:

    >>> import numpy as np
    >>> limits = {"token_ids": [checks.IdsLimit(5, "token ids")]}
    >>> data = tf.data.Dataset.from_tensor_slices({"token_ids": np.array([[1, 2], [3, 7]])}).batch(1)
    >>> next(iter(checked_dataset(data, limits)))["token_ids"].numpy().tolist()
    [[1, 2]]
    """
    spec = dataset.element_spec
    features = spec[0] if isinstance(spec, tuple) else spec
    if not isinstance(features, dict) or not set(features) & set(limits):
        return dataset

    def check(index, element):
        if isinstance(element, tuple):
            return (checks.assert_batch(element[0], limits, WHERE, index), *element[1:])
        return checks.assert_batch(element, limits, WHERE, index)

    return dataset.enumerate().map(check)


@contextlib.contextmanager
def reported(model):
    """Runs a `fit`/`evaluate`/`predict` of `model`: its weights kept on JAX
    (`kzoo.backend.keep_state_on_error`), and a batch refused inside `tf.data`
    raised as the eager `ValueError` (the same words) instead of TensorFlow's
    `InvalidArgumentError`."""
    try:
        with keep_state_on_error(model), checked_before_step():
            yield
    except tf.errors.InvalidArgumentError as error:
        found = _ASSERTION.search(str(error))
        if found is None:
            raise
        raise ValueError(found.group(1)) from None  # kzoo's messages hold nothing TensorFlow escapes
