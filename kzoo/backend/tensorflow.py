"""TensorFlow: dropout's draws under XLA, and kzoo's checks in its graphs.

Under XLA, TensorFlow cannot check id ranges inside the compiled step: kzoo's
models check each batch before it (`kzoo.backend`), and a step
compiled outside them (a user's own `keras.Model` around a kzoo backbone,
with `jit_compile=True`) gets a warning when it is traced (`assert_in_graph`).
"""

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


UNCHECKED_UNDER_XLA = (
    "kzoo cannot check ids and lengths inside a step compiled with XLA on TensorFlow (XLA drops "
    "assertions and clamps out-of-range ids to the table's last row, silently), and this step is "
    "not one of kzoo's models', which check each batch before it. Check your batches first "
    "(kzoo.models.datasets.checked(inputs, backbone.input_limits())), or compile with "
    "jit_compile=False, where kzoo's checks fail a bad step."
)


def assert_in_graph(tensor, bounds, template):
    """`tensor` checked inside a TensorFlow graph: `bounds(tensor)` gives
    `(ok, values)`, and whatever uses the returned copy (a lookup, a weight
    update) waits for an assertion that fails with `template` formatted with
    `values` ("{}" each). Under XLA, which drops assertion ops, `tensor` as
    is, with a warning (see `kzoo.backend`).

    Example:

    >>> import tensorflow as tf
    >>> check = tf.function(lambda x: assert_in_graph(x, lambda t: (t < 5, [t]), "{} >= 5"))
    >>> int(check(tf.constant(3)))
    3
    """
    import tensorflow as tf  # noqa: PLC0415

    if in_xla_compilation():
        warnings.warn(UNCHECKED_UNDER_XLA, UserWarning, stacklevel=2)
        return tensor
    ok, values = bounds(tensor)
    check = tf.debugging.Assert(ok, [tf.strings.format(template, values)], summarize=1)
    with tf.control_dependencies([check]):
        return tf.identity(tensor)


def ids_bounds(ids, size):
    """`(ok, [low, high])` of the ids in a graph, for `assert_in_graph`: ok when
    every id lies in `[0, size)` (an empty tensor is ok)."""
    import tensorflow as tf  # noqa: PLC0415

    values = tf.reshape(ids, [-1])
    low, high = tf.reduce_min(values), tf.reduce_max(values)  # (max, min) of the dtype when empty
    ok = tf.logical_or(tf.equal(tf.size(values), 0), tf.logical_and(low >= 0, high < size))
    return ok, [low, high]


def generator_dataset(data, signature):
    """A `tf.data.Dataset` of `data`'s batches (`data[i]`, read anew each
    epoch, so an order that `set_epoch` changed is followed), of `signature`,
    with tf.data's autotuning off: dropping an epoch's iterator waits for the
    autotuning thread, which on a busy machine stalls the next epoch's first
    batch (0.6-0.9 s with three processes spinning on 2 cores, 10-60 s seen;
    under 0.3 s with it off, the same for a pipeline of tensors without a
    generator; benchmarks/epoch_gap.py, 2026-11-29). Nothing here has a
    parallelism to tune.
    """
    import tensorflow as tf  # noqa: PLC0415

    def batches():
        for index in range(len(data)):
            yield data[index]

    options = tf.data.Options()
    options.autotune.enabled = False
    dataset = tf.data.Dataset.from_generator(batches, output_signature=signature)
    return dataset.apply(tf.data.experimental.assert_cardinality(len(data))).prefetch(2).with_options(options)


def without_retracing_warning(function):
    """`function` (a `tf.function`) marked so that TensorFlow does not warn
    "N out of the last M calls ... triggered tf.function retracing" for it, by
    its private `Function._omit_frequent_tracing_warning` (set by TensorFlow
    itself on the functions a SavedModel loads). TensorFlow counts together
    the traces of every `tf.function` over the same Python code (its key is
    the code object), so several models, each tracing its own step once or
    twice, add up to the warning although none of them retraces needlessly.
    """
    if hasattr(function, "_omit_frequent_tracing_warning"):
        function._omit_frequent_tracing_warning = True
    return function
