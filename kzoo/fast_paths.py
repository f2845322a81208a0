"""The backend-aware choices that make kzoo's steps fast, in one place.

Model and layer code is plain `keras.ops`; how Keras runs it differs per
backend, and two of Keras' defaults leave speed unused (the README's
"Benchmarks" section has the measurements, `benchmarks/run_all.py` repeats them):

- `jit_compile="auto"` compiles with XLA on JAX (always) but on TensorFlow only
  when a GPU/TPU is present. kzoo's models run faster with XLA on
  TensorFlow's CPU too, so their "auto" means XLA on TensorFlow wherever Keras
  would allow it (no `tf.distribute` strategy, every layer `supports_jit`). On
  torch, `torch.compile` (`jit_compile=True`) did not pay for BERT on CPU, so
  "auto" stays eager there. An explicit `jit_compile=True/False` always wins;
  `KZOO_XLA_ON_TENSORFLOW=0` in the environment restores Keras' own "auto"
  (XLA compile time outweighs its speed for many short fits of small models:
  the test suite sets it).
  Under XLA, TensorFlow (like JAX) cannot check id ranges inside the compiled
  step: the preprocessors and eager calls validate ids (`kzoo.backend_checks`).
- Beam search outside `predict`: on TensorFlow an eager `keras.ops.while_loop`
  runs op by op from Python, on torch eager ops record autograd graphs.
  `inference_function` compiles it with XLA on TensorFlow and turns recording
  off on torch. JAX compiles its while loops anyway (and `jax.jit` of a model
  method would bake the weights in as constants).
- On torch, Keras runs `keras.optimizers.Adam`/`AdamW` with multi-tensor
  (`torch._foreach_*`) updates, but only for those exact classes: a subclass
  falls back to one Python-level update per variable, much slower for
  BERT's hundreds of variables. `multi_tensor_base` gives kzoo's optimizer
  subclasses a faster class still: the same update as one fused kernel
  (`torch._fused_adam_`).
"""

import os

import keras

XLA_ON_TENSORFLOW_VARIABLE = "KZOO_XLA_ON_TENSORFLOW"


def xla_on_tensorflow():
    """Whether kzoo's `jit_compile="auto"` means XLA on TensorFlow's CPU too:
    yes, unless the environment variable `KZOO_XLA_ON_TENSORFLOW` is "0" (then
    Keras' own choice: XLA only with a GPU or TPU). Read at every `compile`.

    Example:

    >>> import os
    >>> xla_on_tensorflow() == (os.environ.get("KZOO_XLA_ON_TENSORFLOW", "1") != "0")
    True
    """
    return os.environ.get(XLA_ON_TENSORFLOW_VARIABLE, "1") != "0"


def auto_jit_compile(model, keras_choice):
    """What kzoo's `jit_compile="auto"` means for `model` (the default of
    `compile`, and what `predict`/`fit` use on a model never compiled): on
    TensorFlow with `xla_on_tensorflow()`, XLA wherever Keras could compile
    (no `tf.distribute` strategy, every layer `supports_jit`); elsewhere
    `keras_choice()`, Keras' own (XLA on JAX, eager torch). kzoo's base
    classes answer Keras' `_resolve_auto_jit_compile` with it.

    Example:

    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> tensorflow = keras.backend.backend() == "tensorflow" and xla_on_tensorflow()
    >>> auto_jit_compile(model, lambda: "Keras' choice") == (True if tensorflow else "Keras' choice")
    True
    """
    tensorflow = keras.backend.backend() == "tensorflow"
    if tensorflow and xla_on_tensorflow() and not getattr(model, "_distribute_strategy", None):
        return all(layer.supports_jit for layer in model._flatten_layers())
    return keras_choice()


def multi_tensor_base(optimizer_class):
    """The class to subclass instead of `keras.optimizers.Adam` or `AdamW`: on
    torch, a fused version of Keras' multi-tensor implementation (Keras
    substitutes its multi-tensor class for the exact class only); on other
    backends the class itself.

    The fused step is one `torch._fused_adam_` pass over every variable (the
    kernel behind `torch.optim.Adam(fused=True)`) instead of Keras' eight
    `torch._foreach_*` passes; with epsilon rescaled per step it computes
    Keras' update, `p -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)`.
    Weight decay stays Keras' own (decoupled, with its exclusions).

    Example:

    >>> base = multi_tensor_base(keras.optimizers.AdamW)
    >>> issubclass(base, keras.optimizers.AdamW)
    True
    """
    if keras.backend.backend() != "torch":
        return optimizer_class
    from keras.src.backend.torch.optimizers import torch_adam, torch_adamw  # noqa: PLC0415

    base = {keras.optimizers.Adam: torch_adam.Adam, keras.optimizers.AdamW: torch_adamw.AdamW}[optimizer_class]
    return type(f"Fused{optimizer_class.__name__}", (_FusedAdamStep, base), {})


class _FusedAdamStep:
    """Keras' torch Adam/AdamW step as one fused kernel (see `multi_tensor_base`)."""

    def _parallel_update_step(self, grads, variables, learning_rate):
        import torch  # noqa: PLC0415

        if self.amsgrad or variables[0].value.dtype != torch.float32:
            return super()._parallel_update_step(grads, variables, learning_rate)
        step = float(keras.ops.convert_to_numpy(self.iterations)) + 1
        indices = [self._get_variable_index(v) for v in variables]
        bias_correction_2_sqrt = (1 - self.beta_2**step) ** 0.5
        torch._fused_adam_(
            [v.value for v in variables],
            [g.to(torch.float32) for g in grads],
            [self._momentums[i].value for i in indices],
            [self._velocities[i].value for i in indices],
            [],
            [torch.tensor(step)] * len(variables),
            lr=float(keras.ops.convert_to_numpy(learning_rate)),
            beta1=self.beta_1,
            beta2=self.beta_2,
            weight_decay=0.0,
            eps=self.epsilon / bias_correction_2_sqrt,
            amsgrad=False,
            maximize=False,
        )


def inference_function(function):
    """`function` made fast for inference on each backend: compiled with XLA
    (`tf.function(jit_compile=True)`) on TensorFlow, where an eager
    `keras.ops.while_loop` would run op by op from Python; run without autograd
    recording (`torch.no_grad`) on torch, where eager ops on trainable weights
    would otherwise keep every step's graph alive; itself on JAX. On
    TensorFlow, non-tensor arguments are static (a new value traces again);
    variables are read when called, so later weight changes are seen.

    Example:

    >>> square = inference_function(lambda x: keras.ops.square(x))
    >>> float(square(keras.ops.convert_to_tensor(3.0)))
    9.0
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf  # noqa: PLC0415

        return tf.function(function, jit_compile=True, reduce_retracing=True)
    if backend == "torch":
        import torch  # noqa: PLC0415

        return torch.no_grad()(function)
    return function
