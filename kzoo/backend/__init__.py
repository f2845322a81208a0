"""Backend-specific code, in one marked place: one module per engine
(`tensorflow`, `jax`, `torch`), whose heavy imports happen only when that
engine runs, and the functions here that pick one. Model and layer code is
plain `keras.ops`; what differs is how Keras runs it:

- `auto_jit_compile`: kzoo's `jit_compile="auto"` is XLA on TensorFlow's CPU
  too (`kzoo.backend.tensorflow`), Keras' own choice elsewhere.
- `multi_tensor_base`: kzoo's Adam subclasses get a fused step on torch
  (`kzoo.backend.torch`).
- `inference_function`: beam search compiled with XLA on TensorFlow, without
  autograd on torch, as is on JAX (which compiles its loops anyway).
- `build_optimizer_before_fit`: on TensorFlow the optimizer is built before
  `fit` traces its step, which Keras would otherwise trace (and compile) twice.
- `keep_state_on_error`: a model keeps its weights when `fit`/`predict` fail
  on JAX (`kzoo.backend.jax`).
- `one_garbage_collection`: Keras' quantization frees each float kernel with
  a full `gc.collect()`; kzoo's quantization runs one at the end instead.
- `variable_length_batches`: batches of varying length in memory go to
  Keras' TensorFlow trainer as a `tf.data` pipeline that declares their shapes.
- `map_predictions`: what Keras' `predict_step` returns differs on JAX.
- `with_thread_tuning`: on torch, `fit`/`evaluate`/`predict` time their steps
  and move torch's thread count to the fastest for the machine's load
  (`kzoo.backend.torch_threads`).
- `dropout_uniform`: dropout's random numbers from XLA's own ThreeFry op
  inside TensorFlow's XLA steps (`kzoo.backend.tensorflow`) and on JAX
  (`kzoo.backend.jax`), Keras' `keras.random.uniform` elsewhere.
- `is_concrete`: whether a tensor's values can be read now (input checks run
  in eager calls, not inside traced or compiled functions); `kzoo.backend.checks`
  holds the checks.

Process set-up
--------------
`import kzoo` calls `set_up_process()` before anything else imports
TensorFlow, so that a run shows no TensorFlow C++ log line or warning the user
did not cause, and sets nobody's threads by hand. What it sets, and how to undo it:

- `TF_CPP_MIN_LOG_LEVEL=1` in the environment, unless set: TensorFlow's (and
  jaxlib's) C++ INFO lines are hidden, warnings and errors stay; JAX sets the
  same default. TensorFlow 2.21 logs its first lines while its libraries load,
  before it reads the variable; kzoo applies the level to those itself, and
  uses up two one-time ERROR lines that report nothing wrong (cuInit error 303
  on machines without an NVIDIA driver, oneDNN's "supports DT_INT64 only on
  platforms with AVX-512"): see `kzoo.backend.tensorflow`. Undo:
  `TF_CPP_MIN_LOG_LEVEL=0` shows everything, as without kzoo. Lines logged
  before `import kzoo` (an earlier `import keras` on the tensorflow backend
  imports TensorFlow) are out of kzoo's reach: import kzoo first.
- On the jax and torch backends, where TensorFlow only runs the input
  pipeline, TensorFlow sees no GPU (it would reserve most of each GPU's memory
  at its first op). Undo before any TensorFlow op:
  `tf.config.set_visible_devices(tf.config.list_physical_devices("GPU"), "GPU")`.
- On the torch backend, torch's intra-op threads: one less than the CPUs the
  process may use, at most torch's default, at least one (on 2 cores: 1; two
  threads were about 5x slower next to the input pipeline and on shared
  cores), and from there the count `fit`/`evaluate`/`predict` measure fastest
  for the machine's load, tried again now and then (`kzoo.backend.torch_threads`).
  Undo: `OMP_NUM_THREADS` (or `MKL_NUM_THREADS`) in the environment keeps
  torch's own choice, and `torch.set_num_threads(n)` after `import kzoo` or
  `torch.use_deterministic_algorithms(True)` keeps a count fixed.
- On the jax backend with no accelerator plugin installed (the CPU jaxlib),
  `jax_platforms="cpu"`, unless `JAX_PLATFORMS` is set: JAX runs on the CPU
  either way, without suggesting a CUDA jaxlib on machines with a GPU. Undo:
  `JAX_PLATFORMS=""`.

Private APIs and internal behaviour used (checked with keras 3.15.1,
tensorflow 2.21.0, jax 0.10.2, torch 2.13.0)
---------------------------------------------------------------------
Each is checked by tests/test_backend_private_apis.py, which fails loudly
when one disappears (a silently unused override would only be slower).

- Keras `Trainer._resolve_auto_jit_compile` (overridden by kzoo's `Backbone`
  and `Task` to answer `auto_jit_compile`), `Model._distribute_strategy`
  (also read by `build_optimizer_before_fit`: Keras' TensorFlow trainer builds the
  optimizer inside the first traced step only without a strategy),
  `Layer._flatten_layers` (keras 3.15.1).
- `keras.src.backend.torch.optimizers.torch_adam.Adam` / `torch_adamw.AdamW`
  and their `_parallel_update_step`, `_get_variable_index`, `_momentums`,
  `_velocities` (keras 3.15.1); `torch._fused_adam_` (torch 2.13.0).
- `keras.callbacks.BackupAndRestore._training_metadata_path` (the JSON file
  holding the epochs a backup has finished), read by
  `kzoo.models.batching.resumed_stream` (keras 3.15.1).
- JAX variables' `_value`, `Model._jax_state`, `_jax_state_synced`,
  `jax_state_sync()` (keras 3.15.1).
- Keras `Layer.__delattr__` calls `gc.collect()` for every variable it drops
  (keras 3.15.1): `one_garbage_collection` holds those calls back.
- TensorFlow's `tensorflow.python.ops.control_flow_util.GraphOrParentsInXlaContext`
  (tensorflow 2.21.0).
- No private API in the process set-up. It relies on two TensorFlow behaviours
  that tests/test_backend_setup.py checks: the oneDNN data-type notice is
  logged once per process (`absl::call_once` in tensorflow/core/util/util.cc),
  and cuInit runs at the first `tf.config.list_physical_devices()`.
"""

import contextlib

import numpy as np

from kzoo.backend import jax, tensorflow, torch, torch_threads


def set_up_process():
    """Sets up logging, devices and threads for the current Keras backend
    (module docstring); run once by `import kzoo`. Returns the backend's name.

    Example:

    >>> import keras
    >>> set_up_process() == keras.backend.backend()
    True
    """
    tf = tensorflow.import_quietly()  # before keras: on tensorflow, keras imports it
    import keras  # noqa: PLC0415

    name = keras.backend.backend()
    if name != "tensorflow":
        tensorflow.keep_off_accelerators(tf)
    if name == "torch":
        torch_threads.limit_threads()
    elif name == "jax":
        jax.cpu_when_only_cpu()
    return name


def _backend():
    import keras  # noqa: PLC0415 (after set_up_process: on tensorflow, keras imports TensorFlow)

    return keras.backend.backend()


def auto_jit_compile(model, keras_choice):
    """What kzoo's `jit_compile="auto"` means for `model` (the default of
    `compile`, and what `predict`/`fit` use on a model never compiled): on
    TensorFlow with `tensorflow.xla_on_tensorflow()`, XLA wherever Keras could
    compile; elsewhere `keras_choice()`, Keras' own (XLA on JAX, eager torch).

    Example:

    >>> import keras
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> xla = keras.backend.backend() == "tensorflow" and tensorflow.xla_on_tensorflow()
    >>> auto_jit_compile(model, lambda: "Keras' choice") == (True if xla else "Keras' choice")
    True
    """
    if _backend() == "tensorflow" and tensorflow.xla_on_tensorflow():
        return tensorflow.can_compile_with_xla(model)
    return keras_choice()


def multi_tensor_base(optimizer_class):
    """The class to subclass instead of `keras.optimizers.Adam` or `AdamW`: on
    torch, Keras' multi-tensor class with a fused step (`torch.fused_adam_base`;
    Keras substitutes its multi-tensor class for the exact class only); on the
    other backends the class itself.

    Example:

    >>> import keras
    >>> issubclass(multi_tensor_base(keras.optimizers.AdamW), keras.optimizers.AdamW)
    True
    """
    return torch.fused_adam_base(optimizer_class) if _backend() == "torch" else optimizer_class


def inference_function(function):
    """`function` made fast for inference: compiled with XLA on TensorFlow,
    without autograd recording on torch, itself on JAX (`jax.jit` of a model
    method would bake the weights in as constants).

    Example:

    >>> import keras
    >>> square = inference_function(lambda x: keras.ops.square(x))
    >>> float(square(keras.ops.convert_to_tensor(3.0)))
    9.0
    """
    backend = _backend()
    if backend == "tensorflow":
        return tensorflow.compiled_for_inference(function)
    if backend == "torch":
        return torch.without_autograd(function)
    return function


def variable_length_batches(data):
    """`data`, a `keras.utils.PyDataset` whose batches differ in length
    (`kzoo.models.batching.LengthBatches`), as Keras can read it: on
    TensorFlow a `tf.data.Dataset` of its batches with the shapes of
    `data.signature()` (Keras' own adapter takes the shapes of the first two
    batches as the shapes of all), elsewhere `data` itself.

    Example:

    >>> import numpy as np
    >>> from kzoo.models.batching import LengthBatches
    >>> data = LengthBatches({"token_ids": np.ones((3, 4), "int32")}, batch_size=2)
    >>> len(list(variable_length_batches(data)))
    2
    """
    if _backend() != "tensorflow" or len(data) == 0:
        return data
    return tensorflow.generator_dataset(data, data.signature())


def map_predictions(step_result, function):
    """`function` applied to the outputs in what Keras' `predict_step`
    returns: the outputs, or on JAX `(outputs, non_trainable_variables)`.

    Example:

    >>> result = map_predictions((1, "state") if _backend() == "jax" else 1, lambda y: y + 1)
    >>> result[0] if _backend() == "jax" else result
    2
    """
    if _backend() == "jax":
        outputs, state = step_result
        return function(outputs), state
    return function(step_result)


def with_thread_tuning(callbacks):
    """`callbacks` for a `fit`, `evaluate` or `predict` call, with one that
    tunes torch's thread count added on torch while kzoo sets the count
    (`kzoo.backend.torch_threads`). Keras' own `CallbackList` (the validation
    pass of a `fit`) and other backends get `callbacks` back as they are.

    Example:

    >>> callbacks = with_thread_tuning(None)
    >>> callbacks is None or [type(c).__name__ for c in callbacks] == ["ThreadTuning"]
    True
    """
    import keras  # noqa: PLC0415

    if _backend() != "torch" or isinstance(callbacks, keras.callbacks.CallbackList):
        return callbacks
    tuning = torch_threads.tuning_callback()
    if tuning is None:
        return callbacks
    return [*(callbacks or []), tuning]


@contextlib.contextmanager
def one_garbage_collection():
    """A context manager inside which `gc.collect()` does nothing, and which
    collects once when it ends. Keras' `Layer.__delattr__` runs a full
    collection for every variable a layer drops (each float kernel that
    int8 quantization replaces): 79 for a 2-layer classifier, 0.5 to 0.8 s
    each in a process holding TensorFlow, Keras and a few models (measured
    2026-11-25), where one at the end frees the same memory.

    Example:

    >>> import gc
    >>> with one_garbage_collection():
    ...     gc.collect()
    0
    """
    import gc  # noqa: PLC0415

    collect = gc.collect
    gc.collect = lambda generation=2: 0
    try:
        yield
    finally:
        gc.collect = collect
        gc.collect()


def build_optimizer_before_fit(model):
    """Builds `model.optimizer` before `fit` where Keras would build it
    inside the first traced step: on TensorFlow without a `tf.distribute`
    strategy, whose step TensorFlow then traced twice (a tiny classifier's
    first `fit` 11.4 -> 4.6 s, measured 2026-11-25); Keras builds it
    before the step on JAX and torch. `kzoo.backend.tensorflow.build_optimizer`.

    Example:

    >>> import keras
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="adam", loss="mse")
    >>> build_optimizer_before_fit(model)
    """
    if _backend() == "tensorflow":
        tensorflow.build_optimizer(model)


def keep_state_on_error(model):
    """A context manager that keeps `model`'s weights attached if the block
    raises: needed on JAX (`jax.restore_state_on_error`), nothing elsewhere.

    Example:

    >>> import keras, numpy as np
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> try:
    ...     with keep_state_on_error(model):
    ...         raise RuntimeError("bad batch")
    ... except RuntimeError:
    ...     pass
    >>> model.predict(np.ones((1, 2)), verbose=0).shape
    (1, 1)
    """
    return jax.restore_state_on_error(model) if _backend() == "jax" else contextlib.nullcontext()


def dropout_uniform(shape, seed_generator):
    """float32 numbers uniform in [0, 1) for dropout masks
    (`kzoo.layers.Dropout`), drawn from `seed_generator` (a
    `keras.random.SeedGenerator`). Where XLA compiles the step, from XLA's
    own ThreeFry op: in a function TensorFlow compiles with XLA
    (`kzoo.backend.tensorflow.uniform_in_xla`; a kzoo bert_small training
    step ran 5% faster than with Keras' draw there, measured on one thread)
    and on JAX (`kzoo.backend.jax.uniform_threefry`, eager calls included;
    `jax.random`'s ThreeFry, which XLA compiles from elementwise rounds, was
    3x slower; bert_small training steps 6% faster, compiled 2-3 s sooner:
    medians of 4 alternating processes each, 2026-11-26, Intel Xeon with
    AVX-512, 2 cores). Elsewhere (torch, TensorFlow without XLA)
    `keras.random.uniform`.

    Example:

    >>> import keras
    >>> draws = keras.ops.convert_to_numpy(dropout_uniform((1000,), keras.random.SeedGenerator(0)))
    >>> draws.dtype.name, bool(0 <= draws.min() and draws.max() < 1), bool(0.45 < draws.mean() < 0.55)
    ('float32', True, True)
    """
    if _backend() == "tensorflow" and tensorflow.in_xla_compilation():
        return tensorflow.uniform_in_xla(shape, seed_generator.next())
    if _backend() == "jax":
        return jax.uniform_threefry(shape, seed_generator.next())
    import keras  # noqa: PLC0415

    return keras.random.uniform(shape, dtype="float32", seed=seed_generator)


def is_concrete(x):
    """True when `x`'s values can be read without breaking a trace: NumPy
    values always; backend tensors in eager TensorFlow, outside a JAX trace,
    outside `torch.compile`.

    Example:

    >>> is_concrete(np.zeros(3))
    True
    """
    import keras  # noqa: PLC0415

    if isinstance(x, (np.ndarray, np.generic, list, tuple, int)):
        return True
    if keras.backend.is_keras_tensor(x):
        return False
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf  # noqa: PLC0415

        return tf.executing_eagerly()
    if backend == "jax":
        import jax as jax_module  # noqa: PLC0415

        # A symbolic dimension: an export traced for any batch (`jax.export`, jax2onnx).
        return not isinstance(x, jax_module.core.Tracer) and not jax_module.export.is_symbolic_dim(x)
    if backend == "torch":
        import torch as torch_module  # noqa: PLC0415

        return not torch_module.compiler.is_compiling()
    return False
