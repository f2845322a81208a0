"""TensorFlow: the process set-up (C++ log lines, devices), XLA by default,
compiled inference.

XLA by default
--------------
Keras' `jit_compile="auto"` compiles with XLA on JAX (always) but on
TensorFlow only when a GPU/TPU is present. kzoo's models run faster with XLA
on TensorFlow's CPU too, so their "auto" means XLA on TensorFlow wherever
Keras would allow it (no `tf.distribute` strategy, every layer
`supports_jit`); `KZOO_XLA_ON_TENSORFLOW=0` restores Keras' own choice (XLA
compile time outweighs its speed for many short fits of small models: the
test suite sets it). Under XLA, TensorFlow cannot check id ranges inside the
compiled step: kzoo's models check each batch before it (`kzoo.backend.checks`),
and a step compiled outside them (a user's own `keras.Model` around a kzoo
backbone, with `jit_compile=True`) gets a warning when it is traced
(`assert_in_graph`).

Process set-up
--------------

TensorFlow runs kzoo's input pipelines (`tf.data`, tensorflow-text) on every
Keras backend, and the model too on the tensorflow backend. Its C++ core logs
to stderr through absl; `TF_CPP_MIN_LOG_LEVEL` (0 info, 1 warning, 2 error,
3 fatal: the least severe level shown) filters what it logs while running, but
TensorFlow 2.21 logs its first lines while its libraries load (before it reads
the variable): the oneDNN notice, "Could not find cuda drivers", the CPU
feature notice, absl's "before absl::InitializeLog()" banner, each twice.
`import_quietly` applies the level to those lines itself, and provokes two
once-per-process lines of no use to a user while it still filters:

- `failed call to cuInit: ... UNKNOWN ERROR (303)`, an ERROR line logged on
  every machine without an NVIDIA driver (303 is the CUDA driver library
  failing to load) when TensorFlow first lists its devices;
- `oneDNN supports DT_INT64 only on platforms with AVX-512`, an ERROR line
  logged the first time oneDNN's graph rewrite meets an integer op (tensorflow-
  text's segment packing does), whatever the CPU; it guards the message with a
  process-wide `absl::call_once`, so one run of an integer transpose in a
  throw-away graph session uses it up.

Neither touches TensorFlow's eager context: threads, devices and memory growth
stay configurable (`tf.config`) after `import kzoo`.
"""

import contextlib
import os
import re
import sys
import tempfile
import warnings

LOG_LEVEL_VARIABLE = "TF_CPP_MIN_LOG_LEVEL"

# An absl log line: severity, date, time (seconds since the epoch before absl
# is initialised: "I0000 00:00:1795444923.983301"), thread, file:line.
_LOG_LINE = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [^ \]]+:\d+\] ")
_SEVERITY = {"I": 0, "W": 1, "E": 2, "F": 3}
_ABSL_BANNER = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
_CONTINUATION = "To enable the following instructions:"
# The two ERROR lines provoked on purpose (see the module docstring).
_PROVOKED = (
    re.compile(r"failed call to cuInit: .*\(303\)"),
    re.compile(r"oneDNN supports DT_[A-Z0-9]+ only on platforms with AVX-512"),
)


def min_log_level():
    """The least severe C++ log level shown: `TF_CPP_MIN_LOG_LEVEL`, 1 (warnings)
    when unset (as JAX sets it), 0 when unreadable.

    Example:

    >>> min_log_level() == int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", 1))
    True
    """
    try:
        return int(os.environ.get(LOG_LEVEL_VARIABLE, "1"))
    except ValueError:
        return 0


def drop_lines(text, level):
    """`text` without the log lines below `level`, their continuation lines,
    absl's banner and the provoked lines (see the module docstring); level 0
    keeps everything.

    Example:

    >>> noise = "I0000 00:00:1795444923.98 7 port.cc:153] oneDNN custom operations are on.\\n"
    >>> drop_lines(noise + "a real error\\n", 1)
    'a real error\\n'
    >>> drop_lines(noise, 0) == noise
    True
    """
    if level <= 0:
        return text
    kept, dropping = [], False
    for line in text.splitlines(keepends=True):
        match = _LOG_LINE.match(line)
        if match:
            dropping = _SEVERITY[match.group(1)] < level or any(p.search(line) for p in _PROVOKED)
        elif line.rstrip("\n") == _ABSL_BANNER:
            dropping = True
        else:  # the CPU feature notice's second line goes with it; all else stays
            dropping = dropping and line.startswith(_CONTINUATION)
        if not dropping:
            kept.append(line)
    return "".join(kept)


@contextlib.contextmanager
def filtered_stderr(level):
    """Everything written to file descriptor 2 inside the block (C++ included)
    is held back and written out after it through `drop_lines`. Does nothing at
    level 0 or where descriptor 2 cannot be duplicated."""
    try:
        if level <= 0:
            raise OSError
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            text = drop_lines(held.read().decode("utf-8", "replace"), level)
            if text:
                sys.stderr.write(text)
                sys.stderr.flush()


def import_quietly():
    """Imports TensorFlow with `min_log_level` applied to the lines it logs
    while loading, and uses up its two once-per-process ERROR notices (module
    docstring). Sets `TF_CPP_MIN_LOG_LEVEL=1` unless set; with 0 it logs as
    without kzoo. Returns the `tensorflow` module.

    Example:

    >>> import_quietly().__name__
    'tensorflow'
    """
    # INFO lines (library loading, XLA compiles, tf.data's end of sequence)
    # are not for users; warnings and errors stay (as jax sets it).
    os.environ.setdefault(LOG_LEVEL_VARIABLE, "1")
    level = min_log_level()
    with filtered_stderr(level):
        import tensorflow as tf  # noqa: PLC0415

        if level > 0:
            tf.config.list_physical_devices()  # cuInit happens here
            _use_up_onednn_notice(tf)
    return tf


def _use_up_onednn_notice(tf):
    graph = tf.Graph()
    with graph.as_default():
        ids = tf.constant([[1, 2]], tf.int32)
        transposed = tf.transpose(ids)
    # Default threads: the first session's options size TensorFlow's CPU device
    # for the whole process, so one limited to one thread ran every later XLA
    # step on one core (tests/test_backend_setup.py checks the threads at work).
    with tf.compat.v1.Session(graph=graph, config=tf.compat.v1.ConfigProto(device_count={"GPU": 0})) as session:
        session.run(transposed)


def keep_off_accelerators(tf):
    """When TensorFlow only feeds another backend (`tf.data` next to JAX or
    torch), hides the GPUs from it: it would otherwise reserve most of each
    GPU's memory for itself at its first op. Undo before any TensorFlow op with
    `tf.config.set_visible_devices(tf.config.list_physical_devices("GPU"), "GPU")`.
    Does nothing if TensorFlow already runs (its devices are fixed then)."""
    with contextlib.suppress(RuntimeError, ValueError):
        tf.config.set_visible_devices([], "GPU")


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


UNCHECKED_UNDER_XLA = (
    "kzoo cannot check ids and lengths inside a step compiled with XLA on TensorFlow (XLA drops "
    "assertions and clamps out-of-range ids to the table's last row, silently), and this step is "
    "not one of kzoo's models', which check each batch before it. Check your batches first "
    "(kzoo.models.batch_checks.checked(inputs, backbone.input_limits())), or compile with "
    "jit_compile=False, where kzoo's checks fail a bad step."
)


def assert_in_graph(tensor, bounds, template):
    """`tensor` checked inside a TensorFlow graph: `bounds(tensor)` gives
    `(ok, values)`, and whatever uses the returned copy (a lookup, a weight
    update) waits for an assertion that fails with `template` formatted with
    `values` ("{}" each). Under XLA, which drops assertion ops, `tensor` as
    is, with a warning (see `kzoo.backend.checks`).

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
