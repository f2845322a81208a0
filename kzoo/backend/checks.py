"""Input checks that read tensor values: token ids inside the vocabulary,
positions inside the position table.

Reading values is possible in eager calls on every backend but not inside a
traced or compiled function (`tf.function`, `jax.jit`, `torch.compile`):
`kzoo.backend.is_concrete` tells which; inside a TensorFlow graph (not XLA)
the position check becomes a graph assertion.
"""

import keras

from kzoo.backend import is_concrete
from kzoo.backend import tensorflow as tensorflow_backend


def check_ids_in_range(ids, vocabulary_size, what):
    """Raises the same `ValueError` on every backend for ids outside `[0, vocabulary_size)`.

    Keras' `Embedding` raises on TensorFlow and torch for out-of-range ids but
    silently returns NaN rows (and wraps `-1` to the last row) on JAX. This
    check runs wherever the ids can be read (eager calls); inside compiled
    training and prediction steps the preprocessors validate ids instead.

    Args:
        ids: integer tensor or array.
        vocabulary_size: number of rows of the embedding table.
        what: a name for the ids in the message ("token ids", "segment ids").

    Example:

    >>> import numpy as np
    >>> import numpy as np
    >>> check_ids_in_range(np.array([[1, 7]]), 5, "token ids")
    Traceback (most recent call last):
    ...
    ValueError: token ids must lie in [0, 5) (the embedding table has 5 rows), but got values from 1 to 7. Check that the tokenizer's vocabulary matches the model's `vocabulary_size`.
    """
    if not is_concrete(ids):
        return
    values = keras.ops.convert_to_numpy(ids)
    if values.size == 0:
        return
    low, high = int(values.min()), int(values.max())
    if low < 0 or high >= vocabulary_size:
        raise ValueError(
            f"{what} must lie in [0, {vocabulary_size}) (the embedding table has "
            f"{vocabulary_size} rows), but got values from {low} to {high}. Check "
            "that the tokenizer's vocabulary matches the model's `vocabulary_size`."
        )


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
    ValueError: `position_embedding` got positions 0 to 599, but its position table holds only max_sequence_length=512 positions. Truncate the inputs (the preprocessors' `sequence_length`) or build the model with a larger `max_sequence_length`.
    """
    end = start_index + sequence_length

    def message(first, last):
        return (
            f"`{layer_name}` got positions {first} to {last}, but its position table "
            f"holds only max_sequence_length={max_sequence_length} positions. Truncate "
            "the inputs (the preprocessors' `sequence_length`) or build the model with "
            "a larger `max_sequence_length`."
        )

    if is_concrete(end):
        end, start = int(keras.ops.convert_to_numpy(end)), int(keras.ops.convert_to_numpy(start_index))
        if end > max_sequence_length:
            raise ValueError(message(start, end - 1))
    elif keras.backend.backend() == "tensorflow" and not tensorflow_backend.in_xla_compilation():
        import tensorflow as tf

        check = tf.debugging.assert_less_equal(
            tf.cast(end, "int32"), max_sequence_length, message=message("start", "end")
        )
        # Ops run in parallel in a graph: tie the length to the assertion so the
        # slicing that uses it cannot fail first with an opaque error.
        with tf.control_dependencies([check]):
            return tf.identity(sequence_length)
    return sequence_length
