"""Backend-specific code, in one marked place: one module per engine
(`tensorflow`, `jax`, `torch`), each imported only when its engine runs.

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
  cores). Undo: `OMP_NUM_THREADS` (or `MKL_NUM_THREADS`) in the environment
  keeps torch's own choice, and `torch.set_num_threads(n)` after `import kzoo` wins.
- On the jax backend with no accelerator plugin installed (the CPU jaxlib),
  `jax_platforms="cpu"`, unless `JAX_PLATFORMS` is set: JAX runs on the CPU
  either way, without suggesting a CUDA jaxlib on machines with a GPU. Undo:
  `JAX_PLATFORMS=""`.

Private APIs and internal behaviour used (checked with keras 3.15.1,
tensorflow 2.21.0, jax 0.10.2, torch 2.13.0)
---------------------------------------------------------------------
- No private API in the process set-up. It relies on two TensorFlow behaviours
  that tests/test_backend_setup.py checks: the oneDNN data-type notice is
  logged once per process (`absl::call_once` in tensorflow/core/util/util.cc),
  and cuInit runs at the first `tf.config.list_physical_devices()`.
"""

from kzoo.backend import tensorflow


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
        from kzoo.backend import torch  # noqa: PLC0415

        torch.limit_threads()
    elif name == "jax":
        from kzoo.backend import jax  # noqa: PLC0415

        jax.cpu_when_only_cpu()
    return name
