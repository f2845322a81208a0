"""Ids inside their embedding table, positions inside the position table:
the same message on every backend, in eager calls and in compiled steps.

Data is checked once, where it comes in. kzoo's own `fit`, `evaluate`,
`predict`, `*_on_batch` and `generate` check packed batches on the host
before any step (`check_batch`, `kzoo.models.input_checks`) and run their
steps inside `checked_upstream()`, so the steps they trace carry no check.
A layer called eagerly checks the values it gets. A step kzoo does not drive
(a user's model around a backbone) is checked inside the step, each engine
its own way:

- TensorFlow graph (`tf.function` without XLA): an assertion op tied to the
  ids, so that nothing downstream (the lookup, the weight update) runs first.
- TensorFlow under XLA: nothing can fail a step (XLA drops assertion ops and
  clamps out-of-range ids: no NaN, but wrong rows); a warning says so when
  the step is traced.
- JAX (`jax.jit`): a host callback raises the message (Keras' JAX embedding
  would return NaN rows, and NaN weights after the update).
- torch: eager; under `torch.compile` the values cannot be read.

A graph traced for export to another runtime (ONNX) runs inside
`checked_upstream()` too: that runtime cannot raise kzoo's message.
"""

import contextlib
import contextvars
from typing import NamedTuple

import keras
import numpy as np

from kzoo.backend import is_concrete
from kzoo.backend import jax as jax_backend
from kzoo.backend import tensorflow as tensorflow_backend

VOCABULARY_ADVICE = "Check that the vocabulary of the tokenizer matches the `vocabulary_size` of the model."
SEGMENT_ADVICE = (
    "Segment ids number the packed sentences from 0 (0 for the first, 1 for the second): "
    "check how the inputs were packed, or build the backbone with a larger `num_segments`."
)


class IdsLimit(NamedTuple):
    """Ids of one input must lie in `[0, size)`: the rows of an embedding table.

    Args:
        size: int. The rows of the table.
        what: str. The ids' name in the message (e.g. "`token_embedding` ids").
        advice: str. What to do, the message's last sentence.
    """

    size: int
    what: str
    advice: str = VOCABULARY_ADVICE


class LengthLimit(NamedTuple):
    """One input's last axis must be at most `max_sequence_length` long.

    Args:
        max_sequence_length: int. The rows of the position table.
        what: str. The table's (or the input's) name in the message.
    """

    max_sequence_length: int
    what: str


def ids_message(limit, low, high):
    """The message for ids from `low` to `high` outside `limit` (an `IdsLimit`).

    Example:

    >>> ids_message(IdsLimit(5, "token ids"), 1, 7)
    'token ids must lie in [0, 5) (the embedding table has 5 rows), but got values from 1 to 7. Check that the ...
    """
    return (
        f"{limit.what} must lie in [0, {limit.size}) (the embedding table has {limit.size} "
        f"rows), but got values from {low} to {high}. {limit.advice}"
    )


def length_message(limit, first, last):
    """The message for positions `first` to `last` outside `limit` (a `LengthLimit`).

    Example:

    >>> length_message(LengthLimit(512, "position_embedding"), 0, 599)[:46]
    '`position_embedding` got positions 0 to 599, b'
    """
    return (
        f"`{limit.what}` got positions {first} to {last}, but its position table holds only "
        f"max_sequence_length={limit.max_sequence_length} positions. Truncate the inputs "
        "(`sequence_length` of the preprocessors) or build the model with a larger "
        "`max_sequence_length`."
    )


_UNCHECKED = contextvars.ContextVar("kzoo_checked_upstream", default=False)


@contextlib.contextmanager
def checked_upstream():
    """Inside: traced calls add no checks to their graph (no TensorFlow
    assertion, no JAX host callback) and eager calls read no values (no
    check per torch step), because the data was checked where it came in
    (kzoo's own steps), or the graph goes to a runtime that could not run
    them (ONNX).

    Example:

    >>> import numpy as np
    >>> with checked_upstream():
    ...     check_ids_in_range(np.array([[1, 2]]), 5, "token ids").tolist(), upstream_checked()
    ([[1, 2]], True)
    """
    token = _UNCHECKED.set(True)
    try:
        yield
    finally:
        _UNCHECKED.reset(token)


def upstream_checked():
    """Whether the data was checked where it came in (`checked_upstream`).

    Example:

    >>> upstream_checked()
    False
    """
    return _UNCHECKED.get()


def _template(message_function, limit):
    # The message with "{}" where runtime values go (tf.strings.format).
    return message_function(limit, "{}", "{}")


def check_ids_in_range(ids, vocabulary_size, what, advice=VOCABULARY_ADVICE):
    """Raises the same error on every backend for ids outside `[0, vocabulary_size)`;
    returns `ids` (in a TensorFlow graph, a copy that depends on the check).

    Keras' `Embedding` raises on TensorFlow and torch (eager) for out-of-range
    ids, silently returns NaN rows (and wraps `-1` to the last row) on JAX, and
    clamps them under XLA. Eager calls raise a `ValueError`; compiled steps
    fail as the module docstring says.

    Args:
        ids: integer tensor or array.
        vocabulary_size: number of rows of the embedding table.
        what: a name for the ids in the message ("token ids", "segment ids").
        advice: str. What to do, the message's last sentence. Defaults to
            checking the tokenizer's vocabulary.

    Example:

    >>> import numpy as np
    >>> check_ids_in_range(np.array([[1, 7]]), 5, "token ids")
    Traceback (most recent call last):
    ...
    ValueError: token ids must lie in [0, 5) (the embedding table has 5 rows), but got values from 1 to 7. ...
    """
    if _UNCHECKED.get():
        return ids
    limit = IdsLimit(vocabulary_size, what, advice)
    if is_concrete(ids):
        values = keras.ops.convert_to_numpy(ids)
        if values.size:
            low, high = int(values.min()), int(values.max())
            if low < 0 or high >= vocabulary_size:
                raise ValueError(ids_message(limit, low, high))
        return ids
    backend = keras.backend.backend()
    if backend == "tensorflow" and not keras.backend.is_keras_tensor(ids):
        return tensorflow_backend.assert_in_graph(
            ids, lambda t: _ids_bounds(t, vocabulary_size), _template(ids_message, limit)
        )
    if backend == "jax" and not keras.backend.is_keras_tensor(ids) and np.prod(ids.shape):
        jax_backend.raise_in_step(
            lambda low, high: _ids_error(limit, low, high), keras.ops.min(ids), keras.ops.max(ids)
        )
    return ids


def _ids_error(limit, low, high):
    low, high = int(low), int(high)
    return ValueError(ids_message(limit, low, high)) if low < 0 or high >= limit.size else None


def _ids_bounds(ids, size):
    # TensorFlow: (ok, [low, high]) for the graph assertion.
    import tensorflow as tf  # noqa: PLC0415

    values = tf.reshape(ids, [-1])
    low, high = tf.reduce_min(values), tf.reduce_max(values)  # (max, min) of the dtype when empty
    ok = tf.logical_or(tf.equal(tf.size(values), 0), tf.logical_and(low >= 0, high < size))
    return ok, [low, high]


def check_positions_fit(start_index, sequence_length, max_sequence_length, layer_name):
    """Raises a readable error when positions `start_index .. start_index + sequence_length - 1`
    fall outside a position table of `max_sequence_length` rows; returns
    `sequence_length` (in a TensorFlow graph, a copy that depends on the check).

    Python ints and eager tensors raise a `ValueError` on every backend. Inside
    a TensorFlow graph whose length is only known at run time (a
    `tf.function` retraced with a relaxed shape) the same message comes as a
    `tf.errors.InvalidArgumentError`. Inside `jax.jit` shapes are static, so
    only a traced `start_index` goes unchecked there.

    Example:

    >>> check_positions_fit(0, 600, 512, "position_embedding")
    Traceback (most recent call last):
    ...
    ValueError: `position_embedding` got positions 0 to 599, but its position table holds only ...
    """
    if _UNCHECKED.get():
        return sequence_length
    limit = LengthLimit(max_sequence_length, layer_name)
    end = start_index + sequence_length
    if is_concrete(end):
        end, start = int(keras.ops.convert_to_numpy(end)), int(keras.ops.convert_to_numpy(start_index))
        if end > max_sequence_length:
            raise ValueError(length_message(limit, start, end - 1))
    elif keras.backend.backend() == "tensorflow" and not keras.backend.is_keras_tensor(end):
        import tensorflow as tf  # noqa: PLC0415

        def bounds(_):
            start, stop = tf.cast(start_index, "int32"), tf.cast(end, "int32")
            return stop <= max_sequence_length, [start, stop - 1]

        return tensorflow_backend.assert_in_graph(sequence_length, bounds, _template(length_message, limit))
    return sequence_length


# === Whole batches, where data comes in ===


def check_batch(inputs, limits, where=""):
    """`ValueError`s for packed `inputs` in memory (a dict of arrays, one
    example per row) outside `limits` (input name -> list of `IdsLimit` /
    `LengthLimit`): the eager message, for ids the first example that has
    one, then `where` (e.g. which batch of a dataset).

    Example:

    >>> check_batch({"token_ids": np.array([[1, 2], [1, 9]])}, {"token_ids": [IdsLimit(5, "token ids")]})
    Traceback (most recent call last):
    ...
    ValueError: token ids must lie in [0, 5) (the embedding table has 5 rows), but got values from 1 to 9. ...
    """
    for name, value in inputs.items():
        values = np.asarray(value)
        for limit in limits.get(name, ()):
            if isinstance(limit, LengthLimit):
                if values.ndim and values.shape[-1] > limit.max_sequence_length:
                    raise ValueError(length_message(limit, 0, values.shape[-1] - 1) + where)
            elif values.size:
                low, high = int(values.min()), int(values.max())
                if low < 0 or high >= limit.size:
                    bad = ((values < 0) | (values >= limit.size)).reshape(len(values), -1).any(axis=1)
                    raise ValueError(
                        f"{ids_message(limit, low, high)} The first is in example "
                        f"{int(np.argmax(bad))} of the inputs (counting from 0).{where}"
                    )
