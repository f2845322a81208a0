"""TensorFlow: dropout's draws under XLA, and kzoo's checks in its graphs.

Under XLA, TensorFlow cannot check id ranges inside the compiled step: kzoo's
models check each batch before it (`kzoo.backend.checks`), and a step
compiled outside them (a user's own `keras.Model` around a kzoo backbone,
with `jit_compile=True`) gets a warning when it is traced
(`checked_before_step`).
"""

import contextlib
import os
import warnings


def in_xla_compilation():
    """True while tracing a function TensorFlow compiles with XLA
    (`tf.function(jit_compile=True)`, as Keras' steps with `jit_compile`): XLA
    drops assertion ops there, logging "Ignoring Assert operator" for each, so
    checks that need one are left out (kzoo's models check ids before the step).
    Uses TensorFlow's private `control_flow_util.GraphOrParentsInXlaContext`.
    """
    import tensorflow as tf  # noqa: PLC0415
    from tensorflow.python.ops import control_flow_util  # noqa: PLC0415

    if tf.executing_eagerly():
        return False
    return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


def uniform_in_xla(shape, seed):
    """float32 numbers uniform in [0, 1) by XLA's ThreeFry (no TensorFlow
    kernel outside XLA), from Keras' seed (a `SeedGenerator`'s two int64
    words) taken into int32 as Keras' own TensorFlow draws take it.
    """
    import tensorflow as tf  # noqa: PLC0415

    seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), "int32")
    return tf.random.stateless_uniform(shape, seed=seed, dtype="float32", alg="threefry")


def assert_always(tensor, ok, template, values):
    """`tensor` tied to an assertion that `ok` (a boolean tensor) holds,
    failing with `template` formatted with `values` ("{}" each) as a
    `tf.errors.InvalidArgumentError`; for graphs XLA does not compile (e.g.
    `tf.data`). Ops run in parallel in a graph: whatever uses the returned copy
    (a lookup, a weight update) waits for the check.

    Example:

    >>> import tensorflow as tf
    >>> assert_always(tf.constant(3), tf.constant(False), "got {}", [tf.constant(3)])
    Traceback (most recent call last):
    ...
    tensorflow.python.framework.errors_impl.InvalidArgumentError: ...got 3...
    """
    import tensorflow as tf  # noqa: PLC0415

    check = tf.debugging.Assert(ok, [tf.strings.format(template, values)], summarize=1)
    with tf.control_dependencies([check]):
        return tf.nest.map_structure(tf.identity, tensor)


UNCHECKED_UNDER_XLA = (
    "kzoo cannot check ids and lengths inside a step compiled with XLA on TensorFlow (XLA drops "
    "assertions and clamps out-of-range ids to the table's last row, silently), and this step is "
    "not one of kzoo's models', which check each batch before it. Check your batches first "
    "(kzoo.models.batch_checks.checked(inputs, backbone.input_limits())), or compile with "
    "jit_compile=False, where kzoo's checks fail a bad step."
)
_checked_before_step = [0]  # how many kzoo fit/evaluate/predict/generate calls are running


@contextlib.contextmanager
def checked_before_step():
    """While it runs, steps traced under XLA are kzoo's, whose batches were
    checked before the step: `assert_in_graph` does not warn.

    Example:

    >>> with checked_before_step():
    ...     _checked_before_step[0]
    1
    """
    _checked_before_step[0] += 1
    try:
        yield
    finally:
        _checked_before_step[0] -= 1


def assert_in_graph(tensor, bounds, template):
    """`tensor` checked inside a TensorFlow graph: `bounds(tensor)` gives
    `(ok, values)` and `assert_always` ties the assertion. Under XLA, which
    drops assertion ops, `tensor` as is (see `kzoo.backend.checks`), with a
    warning unless kzoo checked the batch before the step (`checked_before_step`).

    Example:

    >>> import tensorflow as tf
    >>> check = tf.function(lambda x: assert_in_graph(x, lambda t: (t < 5, [t]), "{} >= 5"))
    >>> int(check(tf.constant(3)))
    3
    """
    if in_xla_compilation():
        if not _checked_before_step[0]:
            warnings.warn(UNCHECKED_UNDER_XLA, UserWarning, stacklevel=2)
        return tensor
    ok, values = bounds(tensor)
    return assert_always(tensor, ok, template, values)


def generator_dataset(data, signature):
    """A `tf.data.Dataset` of `data`'s batches (`data[i]`, read anew each
    epoch, so an order that `set_epoch` changed is followed), of `signature`.
    """
    import tensorflow as tf  # noqa: PLC0415

    def batches():
        for index in range(len(data)):
            yield data[index]

    dataset = tf.data.Dataset.from_generator(batches, output_signature=signature)
    return dataset.apply(tf.data.experimental.assert_cardinality(len(data))).prefetch(2)
