"""TensorFlow: Adam's fused kernel, dropout's draws under XLA, and kzoo's checks in its graphs.

Under XLA, TensorFlow cannot check id ranges inside the compiled step: kzoo's
models check each batch before it (`kzoo.backend`), and a step
compiled outside them (a user's own `keras.Model` around a kzoo backbone,
with `jit_compile=True`) gets a warning when it is traced (`assert_in_graph`).
"""

import warnings

import tensorflow as tf
from tensorflow.python.ops import control_flow_util


def in_xla_compilation():
    """True while tracing a function TensorFlow compiles with XLA, which drops
    assertion ops (TensorFlow's private `control_flow_util.GraphOrParentsInXlaContext`)."""
    if tf.executing_eagerly():
        return False
    return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


def apply_adam(variable, m, v, gradient, scalars, beta_1, beta_2):
    """One variable's Adam step as TensorFlow's fused kernel (`ResourceApplyAdam`,
    XLA's too): the moments' update, then `variable -= learning_rate *
    sqrt(1 - beta_2_power) / (1 - beta_1_power) * m / (sqrt(v) + epsilon)`,
    `scalars` holding those (in `variable`'s dtype). One op where the step in
    `keras.ops` traces 22 per variable. `variable` is a `tf.Variable` (a
    replica's, under a strategy's `update`); `m` and `v` are Keras variables."""
    dtype = variable.dtype
    gradient = tf.convert_to_tensor(tf.cast(gradient, dtype))  # a dense update, as JAX's and torch's
    return tf.raw_ops.ResourceApplyAdam(
        var=variable.handle, m=m.value.handle, v=v.value.handle, beta1_power=scalars["beta_1_power"],
        beta2_power=scalars["beta_2_power"], lr=scalars["learning_rate"], beta1=tf.constant(beta_1, dtype),
        beta2=tf.constant(beta_2, dtype), epsilon=scalars["epsilon"], grad=gradient)


def uniform_in_xla(shape, seed):
    """float32 uniform in [0, 1) by XLA's ThreeFry, from Keras' seed (two int64
    words) taken into int32 as Keras' own TensorFlow draws take it."""
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
    `(ok, values)`, and users of the returned copy wait for an assertion that
    fails with `template` formatted with `values`; under XLA, `tensor` as is,
    with a warning."""
    if in_xla_compilation():
        warnings.warn(UNCHECKED_UNDER_XLA, UserWarning, stacklevel=2)
        return tensor
    ok, values = bounds(tensor)
    check = tf.debugging.Assert(ok, [tf.strings.format(template, values)], summarize=1)
    with tf.control_dependencies([check]):
        return tf.identity(tensor)


def ids_bounds(ids, size):
    """`(ok, [low, high])` of `ids` in a graph: ok when every id (of none too) lies in `[0, size)`."""
    values = tf.reshape(ids, [-1])
    low, high = tf.reduce_min(values), tf.reduce_max(values)  # (max, min) of the dtype when empty
    ok = tf.logical_or(tf.equal(tf.size(values), 0), tf.logical_and(low >= 0, high < size))
    return ok, [low, high]


def generator_dataset(data):
    """A `tf.data.Dataset` of `data`'s batches (`data[i]`, read anew each epoch,
    so an order `set_epoch` changed is followed), every axis of unknown size,
    with tf.data's autotuning off: dropping an epoch's iterator waits for its
    thread, which stalls the next epoch's first batch on a busy machine."""
    spec = tf.nest.map_structure(lambda a: tf.TensorSpec([None] * a.ndim, tf.as_dtype(a.dtype)), data[0])
    options = tf.data.Options()
    options.autotune.enabled = False
    dataset = tf.data.Dataset.from_generator(lambda: map(data.__getitem__, range(len(data))), output_signature=spec)
    return dataset.apply(tf.data.experimental.assert_cardinality(len(data))).prefetch(2).with_options(options)


def without_retracing_warning(function):
    """`function` (a `tf.function`) marked, by its private
    `_omit_frequent_tracing_warning`, so that TensorFlow does not warn about
    retracing: it counts together the traces of every `tf.function` over the
    same Python code, so several models add up to the warning."""
    if hasattr(function, "_omit_frequent_tracing_warning"):
        function._omit_frequent_tracing_warning = True
    return function
