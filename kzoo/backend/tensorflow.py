"""TensorFlow: XLA by default, compiled inference, dropout's draws under XLA.

Keras' `jit_compile="auto"` compiles with XLA on JAX (always) but on
TensorFlow only when a GPU/TPU is present. kzoo's "auto" means XLA on
TensorFlow's CPU too, wherever Keras would allow it (no `tf.distribute`
strategy, every layer `supports_jit`); `KZOO_XLA_ON_TENSORFLOW=0` restores
Keras' own choice (the test suite sets it: XLA compile time outweighs its
speed for many short fits of tiny models). Under XLA, TensorFlow cannot check
id ranges inside the compiled step: kzoo's models check each batch before it
(`kzoo.backend.checks`), and a step compiled outside them (a user's own
`keras.Model` around a kzoo backbone, with `jit_compile=True`) gets a warning
when it is traced (`checked_before_step`).
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

    Example:

    >>> import tensorflow as tf
    >>> in_xla_compilation(), bool(tf.function(in_xla_compilation, jit_compile=True)())
    (False, True)
    """
    import tensorflow as tf  # noqa: PLC0415
    from tensorflow.python.ops import control_flow_util  # noqa: PLC0415

    if tf.executing_eagerly():
        return False
    return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


def uniform_in_xla(shape, seed):
    """float32 numbers uniform in [0, 1) with the ThreeFry algorithm, for a
    function TensorFlow compiles with XLA (where Keras' draw, the default
    algorithm, costs a kzoo bert_small training step about 5%: measured on one
    thread, 2026-11-26, AMD EPYC, AVX2). TensorFlow has no ThreeFry kernel outside
    XLA. `seed`: Keras' seed (a `SeedGenerator`'s two int64 words), taken
    into int32 as Keras' own TensorFlow draws take it.

    Example:

    >>> import tensorflow as tf
    >>> draw = tf.function(lambda seed: uniform_in_xla((2, 3), seed), jit_compile=True)
    >>> draw(tf.constant([7, 0], "int64")).shape
    TensorShape([2, 3])
    """
    import tensorflow as tf  # noqa: PLC0415

    seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), "int32")
    return tf.random.stateless_uniform(shape, seed=seed, dtype="float32", alg="threefry")


XLA_ON_TENSORFLOW_VARIABLE = "KZOO_XLA_ON_TENSORFLOW"


def xla_on_tensorflow():
    """Whether kzoo's `jit_compile="auto"` means XLA on TensorFlow's CPU too:
    yes, unless the environment variable `KZOO_XLA_ON_TENSORFLOW` is "0" (then
    Keras' own choice: XLA only with a GPU or TPU). Read at every `compile`.

    Example:

    >>> xla_on_tensorflow() == (os.environ.get("KZOO_XLA_ON_TENSORFLOW", "1") != "0")
    True
    """
    return os.environ.get(XLA_ON_TENSORFLOW_VARIABLE, "1") != "0"


def can_compile_with_xla(model):
    """True when Keras could compile `model`'s steps with XLA: no
    `tf.distribute` strategy and every layer `supports_jit` (the conditions of
    Keras' own "auto"; reads the private `_distribute_strategy` and
    `_flatten_layers`, see `kzoo.backend`)."""
    if getattr(model, "_distribute_strategy", None):
        return False
    return all(layer.supports_jit for layer in model._flatten_layers())


def build_optimizer(model):
    """Builds `model.optimizer` for `model.trainable_weights` before `fit`
    traces its step, when Keras would build it inside the first trace (no
    `tf.distribute` strategy: Keras' `_maybe_symbolic_build` defers): a
    `tf.function` that creates variables is traced twice, so the first `fit`
    traced (and with XLA compiled) its step twice. Reads the private
    `_distribute_strategy` (see `kzoo.backend`).

    Example:

    >>> import keras
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="adam", loss="mse")
    >>> build_optimizer(model)
    >>> model.optimizer.built
    True
    """
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None or optimizer.built or not model.built or getattr(model, "_distribute_strategy", None):
        return
    optimizer.build(model.trainable_weights)


def compiled_for_inference(function):
    """`function` compiled with XLA: an eager `keras.ops.while_loop` (beam
    search) would run op by op from Python. Non-tensor arguments are static (a
    new value traces again); variables are read when called.

    Example:

    >>> import tensorflow as tf
    >>> float(compiled_for_inference(lambda x: x * x)(tf.constant(3.0)))
    9.0
    """
    import tensorflow as tf  # noqa: PLC0415

    return tf.function(function, jit_compile=True, reduce_retracing=True)


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

    Example:

    >>> import tensorflow as tf
    >>> batches = [(tf.constant([[1, 2]]),), (tf.constant([[3]]),)]
    >>> data = generator_dataset(batches, (tf.TensorSpec([None, None], tf.int32),))
    >>> [tuple(x.shape) for (x,) in data]
    [(1, 2), (1, 1)]
    """
    import tensorflow as tf  # noqa: PLC0415

    def batches():
        for index in range(len(data)):
            yield data[index]

    dataset = tf.data.Dataset.from_generator(batches, output_signature=signature)
    return dataset.apply(tf.data.experimental.assert_cardinality(len(data))).prefetch(2)
