"""Backend-specific code, in one marked place: one module per engine
(`tensorflow`, `jax`, `torch`; JAX and torch imported only when that engine
runs, TensorFlow always, as it runs kzoo's data path), the functions here
that pick one (for a search's key/value caches in `decoding`, re-exported),
and the input checks that read values (the last section).
Model and layer code is plain `keras.ops`. What each fast path buys is
measured on the documentation's benchmarks page. `import kzoo` changes no
process state (torch keeps its own thread count: one per core).

Private APIs and internal behaviour used (checked with keras 3.15.1,
tensorflow 2.21.0, jax 0.10.2, torch 2.13.0)
---------------------------------------------------------------------
Each is checked by tests/backend/test_private_apis.py, which fails loudly
when one disappears (a silently unused override would only be slower).

- Keras `Trainer._resolve_auto_jit_compile` (overridden by `BaseModel` to
  answer `auto_jit_compile`), `Model._distribute_strategy` (also read by
  `build_optimizer_before_fit`: Keras' TensorFlow trainer builds the optimizer
  inside the first traced step only without a strategy), `Layer._flatten_layers`,
  `Trainer._compute_loss` (overridden by `BaseModel`: every backend's train
  and test steps compute the loss there, `kzoo.models.accumulation`) (keras 3.15.1).
- `keras.src.backend.torch.optimizers.torch_adam.Adam` / `torch_adamw.AdamW`
  and their `_parallel_update_step`; Keras optimizers' `_get_current_learning_rate`
  (the schedule's value, overridden by `adam_base`'s step to evaluate it once a
  step); Keras Adam's `_get_variable_index`,
  `_momentums`, `_velocities`, `_velocity_hats`, read by `adam_base`'s step on
  every backend (keras 3.15.1); `torch._fused_adam_` (torch 2.13.0).
- Keras' `evaluate(..., _use_cached_eval_dataset=True)`, `fit`'s call for its
  validation pass, which reads the cached validation iterator and ignores `x`:
  `BaseModel.evaluate` passes it through unprepared (keras 3.15.1).
- Keras' TensorFlow optimizers' `_distribution_strategy` (`num_replicas_in_sync`), read by
  `kzoo.BertAdamW` to sum replicas' gradients before clipping where there are several (keras 3.15.1).
- Keras `Optimizer._learning_rate` (the schedule an optimizer was built with), read by
  `kzoo.models.Task` to schedule its default optimizer at `fit`, without compiling (keras 3.15.1).
- `keras.callbacks.BackupAndRestore._training_metadata_path` (the JSON file
  holding the epochs a backup has finished), read by
  `kzoo.models.datasets.resumed_stream` (keras 3.15.1).
- JAX variables' `_value`, `Model._jax_state`, `_jax_state_synced`,
  `jax_state_sync()`, and the JAX trainer's `predict_step(state, data)` (state:
  the trainable and non-trainable variables' values), called by
  `jax.predict_on_batch` (keras 3.15.1).
- XLA's experimental `xla_cpu_experimental_ynn_fusion_type` option, set empty for
  kzoo's own `jax.jit` calls (`jax.inference_compiler_options`) (jaxlib 0.10.2).
- Keras `Layer.__delattr__` calls `gc.collect()` for every variable it drops
  (keras 3.15.1): `kzoo.models.quantization` holds those calls back.
- `torch.jit.trace` (deprecated in torch 2.13, checked on 2.13.0): `torch.TracedCalls`
  runs small predict batches and the Transformer's decoder steps through it, eagerly if it fails or is gone.
  A decoder step's trace relies on the tracer keeping a slice bound read from a tensor
  (`cache[:, :index + 1]`) as a graph value, not the traced call's number, and recording
  in-place writes to its inputs (`write_cache`) (torch 2.13.0).
- TensorFlow's `tensorflow.python.ops.control_flow_util.GraphOrParentsInXlaContext`,
  and `Function._omit_frequent_tracing_warning` (`without_retracing_warning`) (tensorflow 2.21.0).
"""

import contextlib
import contextvars
import operator
import os

import keras
import numpy as np
import tensorflow as tf

from kzoo.backend import jax, tensorflow, torch
from kzoo.backend.decoding import (  # noqa: F401 (kzoo.backend's names)
    attention_layout,
    cache_attention,
    cache_lengths,
    cache_rows,
    search_loop,
    take_rows,
    write_cache,
)
from kzoo.backend.limits import VOCABULARY_ADVICE, IdsLimit, LengthLimit, ids_error, ids_message, length_message


def auto_jit_compile(model, keras_choice):
    """`jit_compile="auto"`: XLA on TensorFlow where Keras could compile (no
    strategy, every layer `supports_jit`) unless `KZOO_XLA_ON_TENSORFLOW=0`,
    elsewhere `keras_choice()`, Keras' own."""
    if keras.backend.backend() == "tensorflow" and os.environ.get("KZOO_XLA_ON_TENSORFLOW", "1") != "0":
        if getattr(model, "_distribute_strategy", None):
            return False
        return all(map(operator.attrgetter("supports_jit"), model._flatten_layers()))
    return keras_choice()


def adam_base(optimizer_class):
    """The class to subclass instead of Keras' `Adam` or `AdamW`: Adam as
    Kingma & Ba (2015) write it in Algorithm 1, epsilon added to sqrt(v_hat),
    as PyTorch and Hugging Face do. Keras adds it to sqrt(v), which in
    Algorithm 1's terms is an epsilon 1 / sqrt(1 - beta_2^t) times larger
    (32x at the first step with beta_2 0.999): fine-tuning then learns more
    slowly over its first hundreds of steps. One fused kernel on torch
    (`torch.fused_adam_base`) and, per variable, on TensorFlow (`_AdamStep`)."""
    if keras.backend.backend() == "torch":
        return torch.fused_adam_base(optimizer_class)
    return type(optimizer_class.__name__, (_AdamStep, optimizer_class), {})


class _AdamStep:
    """Keras' Adam/AdamW `update_step` as Algorithm 1 (see `adam_base`), in
    PyTorch's order of operations; weight decay stays Keras' own (decoupled,
    applied before it). The step's scalars (the learning rate, the bias
    corrections) are computed once per step: Keras evaluates the schedule
    again for each weight-decayed variable and the corrections for each
    variable, half of a traced optimizer step's ops on TensorFlow. There the
    update is TensorFlow's fused Adam kernel (`tensorflow.apply_adam`)."""

    _step_scalars = None

    def apply(self, grads, trainable_variables=None):
        ops = keras.ops
        learning_rate = ops.cast(super()._get_current_learning_rate(), "float32")
        step = ops.cast(self.iterations + 1, "float32")
        powers = [ops.power(ops.cast(beta, "float32"), step) for beta in (self.beta_1, self.beta_2)]
        correction_2_sqrt = ops.sqrt(1 - powers[1])
        self._step_scalars = dict(learning_rate=learning_rate, beta_1_power=powers[0], beta_2_power=powers[1],
                                  step_size=learning_rate / (1 - powers[0]), correction_2_sqrt=correction_2_sqrt,
                                  epsilon=self.epsilon * correction_2_sqrt)
        try:
            return super().apply(grads, trainable_variables)
        finally:
            self._step_scalars = None

    def _get_current_learning_rate(self):
        if self._step_scalars is None:
            return super()._get_current_learning_rate()
        return self._step_scalars["learning_rate"]

    def update_step(self, gradient, variable, learning_rate):
        ops, dtype = keras.ops, variable.dtype
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        scalars = {name: ops.cast(value, dtype) for name, value in self._step_scalars.items()}
        if keras.backend.backend() == "tensorflow" and not self.amsgrad:
            # epsilon * sqrt(1 - beta_2^t) added to sqrt(v) is epsilon added to sqrt(v_hat).
            return tensorflow.apply_adam(variable, m, v, gradient, scalars, self.beta_1, self.beta_2)
        gradient = ops.cast(gradient, dtype)
        self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1 - self.beta_1))
        self.assign_add(v, ops.multiply(ops.subtract(ops.square(gradient), v), 1 - self.beta_2))
        if self.amsgrad:  # the largest second moment so far (Reddi et al. 2018), as Keras and PyTorch
            self.assign(self._velocity_hats[index], ops.maximum(self._velocity_hats[index], v))
            v = self._velocity_hats[index]
        # lr / (1 - beta_1^t) * m / (sqrt(v) / sqrt(1 - beta_2^t) + epsilon) = lr * m_hat / (sqrt(v_hat) + epsilon)
        denominator = ops.add(ops.divide(ops.sqrt(v), scalars["correction_2_sqrt"]), self.epsilon)
        self.assign_sub(variable, ops.multiply(scalars["step_size"], ops.divide(m, denominator)))


def inference_function(model, function):
    """`function(*arguments)` of `model`'s variables compiled for the backend:
    traced with XLA on TensorFlow, `jax.jit` with the variables passed in on
    JAX (`jax.compiled_inference`), without autograd on torch. Arguments that
    are not tensors are fixed at each trace."""
    backend = keras.backend.backend()
    if backend == "tensorflow":  # non-tensor arguments are static; variables are read when called
        return tf.function(function, jit_compile=True, reduce_retracing=True, autograph=False)
    if backend == "torch":
        import torch as torch_module  # noqa: PLC0415

        return torch_module.no_grad()(function)
    return jax.compiled_inference(model, function)


def fast_predict_function(model, predict_function):
    """`model`'s Keras `predict_function`, on torch with small batches run as
    traces (`torch.small_batch_traces`); as is elsewhere (compiled already)."""
    if keras.backend.backend() != "torch" or predict_function is None:
        return predict_function
    return torch.small_batch_traces(model, predict_function)


def predict_on_batch(model, x, keras_predict_on_batch):
    """Keras' `predict_on_batch` (`keras_predict_on_batch(x)`); on JAX, for a
    built model compiled with XLA outside a `keras.distribution`,
    `jax.predict_on_batch` (the variables neither donated nor written back:
    one text per call 1 ms faster of 16)."""
    lean = model.built and model.jit_compile and keras.distribution.distribution() is None
    if keras.backend.backend() == "jax" and lean:
        return jax.predict_on_batch(model, x)
    return keras_predict_on_batch(x)


def decoder_steps(model, step):
    """`step` (`Transformer.next_token_logits`, or its encoding of the source for
    the caches: tensors in, tensors out), on torch run as traces of itself per
    shape (`torch.TracedCalls`: Keras' per-layer Python was 2/3 of an eager
    step); as is elsewhere (compiled with the search)."""
    if keras.backend.backend() != "torch":
        return step
    return torch.TracedCalls(model, step)


def cross_entropy(logits, labels, label_smoothing=0.0):
    """Per position, the cross-entropy of `softmax(logits)` (float32 `(..., V)`)
    against `labels` (int `(...)`) smoothed with ε = `label_smoothing`:
    `(1 - ε) · -log p(label) + ε · -mean_v log p(v)`. On torch from
    `log_softmax` (its fused backward), elsewhere from `logsumexp(z) - z_label`
    and `logsumexp(z) - mean(z)`: XLA differentiates the log-softmax tensor
    slowly (forward and backward at 128 x 16 x 3,857: JAX 42 -> 8 ms,
    TensorFlow 18 -> 13; torch 20, or 30 this way).

    Example:

    >>> import numpy as np
    >>> logits, labels = np.log(np.array([[0.5, 0.25, 0.25]], "float32")), np.array([0])
    >>> round(float(cross_entropy(logits, labels)[0]), 4)  # -log 0.5
    0.6931
    >>> round(float(cross_entropy(logits, labels, 1.0)[0]), 4)  # -(log 0.5 + 2 log 0.25) / 3
    1.1552
    """
    ops = keras.ops
    labels = ops.expand_dims(ops.cast(labels, "int32"), -1)
    size = logits.shape[-1]
    if keras.backend.backend() == "torch":
        log_probs = ops.log_softmax(logits, axis=-1)
        loss = -ops.squeeze(ops.take_along_axis(log_probs, labels, axis=-1), -1)
        # A sum, not a mean: torch's mean backward divides a (..., V) copy.
        uniform = ops.sum(log_probs, axis=-1) / -size if label_smoothing else None
    else:
        total = ops.logsumexp(logits, axis=-1)
        loss = total - ops.squeeze(ops.take_along_axis(logits, labels, axis=-1), -1)
        uniform = total - ops.sum(logits, axis=-1) / size if label_smoothing else None
    return (1.0 - label_smoothing) * loss + label_smoothing * uniform if label_smoothing else loss


def variable_length_batches(data):
    """`data` (batches of varying lengths, `LengthBatches`) as Keras reads it: on
    TensorFlow a `tf.data.Dataset` of unknown lengths (Keras' adapter takes the
    first batches' shapes for all), elsewhere `data` itself."""
    if keras.backend.backend() != "tensorflow" or len(data) == 0:
        return data
    return tensorflow.generator_dataset(data)


def dense_gradient(table):
    """`table` times one on TensorFlow, so that its gradient is dense, not
    `tf.IndexedSlices` (lazy Adam): the update JAX and torch make. Elsewhere `table`."""
    return table * 1.0 if keras.backend.backend() == "tensorflow" else table


def build_optimizer_before_fit(model):
    """`model.optimizer` built before `fit` on TensorFlow, not inside the first
    traced step (which TensorFlow then traces twice), as on JAX and torch."""
    optimizer = getattr(model, "optimizer", None)
    if keras.backend.backend() != "tensorflow" or optimizer is None or optimizer.built or not model.built:
        return
    if not getattr(model, "_distribute_strategy", None):
        optimizer.build(model.trainable_weights)


def without_retracing_warning(function):
    """`function` (a traced step or preprocessor) marked on TensorFlow so that its
    retracing warning does not count every model's traces together; as is elsewhere."""
    return tensorflow.without_retracing_warning(function) if keras.backend.backend() == "tensorflow" else function


def dropout_uniform(shape, seed_generator):
    """Uniform float32 in [0, 1) for dropout masks from `seed_generator`: XLA's
    ThreeFry op under XLA on TensorFlow and on JAX, `keras.random.uniform` elsewhere."""
    if keras.backend.backend() == "tensorflow" and tensorflow.in_xla_compilation():
        return tensorflow.uniform_in_xla(shape, seed_generator.next())
    if keras.backend.backend() == "jax":
        return jax.uniform_threefry(shape, seed_generator.next())
    return keras.random.uniform(shape, dtype="float32", seed=seed_generator)


def is_concrete(x):
    """True when `x`'s values can be read without breaking a trace: NumPy values,
    eager TensorFlow, outside a JAX trace (or symbolic export dimension), outside `torch.compile`."""
    if isinstance(x, (np.ndarray, np.generic, list, tuple, int)):
        return True
    if keras.backend.is_keras_tensor(x):
        return False
    backend = keras.backend.backend()
    if backend == "tensorflow":
        return tf.executing_eagerly()
    if backend == "jax":
        import jax as jax_module  # noqa: PLC0415

        # A symbolic dimension: an export traced for any batch (`jax.export`, jax2onnx).
        return not isinstance(x, jax_module.core.Tracer) and not jax_module.export.is_symbolic_dim(x)
    if backend == "torch":
        import torch as torch_module  # noqa: PLC0415

        return not torch_module.compiler.is_compiling()
    return False


# === Checks that read values ===
#
# Ids inside their embedding table, positions inside the position table, in
# the same words on every backend (`kzoo.backend.limits`). kzoo's own `fit`,
# `evaluate`, `predict`, `*_on_batch` and `generate` check packed batches on
# the host before any step (`check_batch`) and trace their steps inside
# `checked_upstream()`, without checks; so does an export to ONNX, whose
# runtime could not raise kzoo's message. A layer called eagerly checks the
# values it gets; a step kzoo does not drive (a user's model around a
# backbone), inside the step: a TensorFlow graph by an assertion op tied to
# the ids (none under XLA, which drops assertions and clamps ids: a warning
# when traced), JAX by a host callback (Keras' JAX embedding would return NaN
# rows), torch eagerly (not under `torch.compile`).

# True inside `checked_upstream`: the data was checked where it came in.
CHECKED_UPSTREAM = contextvars.ContextVar("kzoo_checked_upstream", default=False)


@contextlib.contextmanager
def checked_upstream(model=None, refused=()):
    """Steps without checks on data checked where it came in (or for runtimes
    that could not run them, ONNX); on JAX `model` restored after a call that
    raised (`jax.restore_state_on_error`); a batch refused in `tf.data` raised
    as its check's `ValueError`, the last in `refused`."""
    token = CHECKED_UPSTREAM.set(True)
    on_jax = model is not None and keras.backend.backend() == "jax"
    try:
        with jax.restore_state_on_error(model) if on_jax else contextlib.nullcontext():
            yield
    except tf.errors.OpError:
        if not refused:
            raise
        raise refused[-1] from None
    finally:
        CHECKED_UPSTREAM.reset(token)


def check_ids_in_range(ids, vocabulary_size, what, advice=VOCABULARY_ADVICE):
    """The same error on every backend for ids outside `[0, vocabulary_size)`
    (Keras' embedding raises on TensorFlow and torch, returns NaN rows on JAX,
    clamps under XLA); returns `ids`, in a TensorFlow graph a copy that depends
    on the check. Eager calls raise a `ValueError`; compiled steps fail as the
    comment above says. `advice` is the message's last sentence."""
    if CHECKED_UPSTREAM.get():
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
        return tensorflow.assert_in_graph(
            ids, lambda t: tensorflow.ids_bounds(t, vocabulary_size), ids_message(limit, "{}", "{}")
        )
    if backend == "jax" and not keras.backend.is_keras_tensor(ids) and np.prod(ids.shape):
        jax.raise_in_step(
            lambda low, high: ids_error(limit, low, high), keras.ops.min(ids), keras.ops.max(ids)
        )
    return ids


def check_positions_fit(start_index, sequence_length, max_sequence_length, layer_name):
    """A `ValueError` (an `InvalidArgumentError` in a TensorFlow graph whose
    length is known at run time only) when positions `start_index ..
    start_index + sequence_length - 1` fall outside a position table of
    `max_sequence_length` rows; returns `sequence_length` (in a graph, a copy
    that depends on the check)."""
    if CHECKED_UPSTREAM.get():
        return sequence_length
    limit = LengthLimit(max_sequence_length, layer_name)
    end = start_index + sequence_length
    if is_concrete(end):
        end, start = int(keras.ops.convert_to_numpy(end)), int(keras.ops.convert_to_numpy(start_index))
        if end > max_sequence_length:
            raise ValueError(length_message(limit, start, end - 1))
    elif keras.backend.backend() == "tensorflow" and not keras.backend.is_keras_tensor(end):
        def bounds(_):
            start, stop = tf.cast(start_index, "int32"), tf.cast(end, "int32")
            return stop <= max_sequence_length, [start, stop - 1]

        return tensorflow.assert_in_graph(sequence_length, bounds, length_message(limit, "{}", "{}"))
    return sequence_length


# === Whole batches, where data comes in ===


def check_batch(inputs, limits, where=""):
    """`ValueError`s for packed `inputs` in memory (a dict of arrays, one example
    per row) outside `limits` (input name -> `IdsLimit`s / `LengthLimit`s): the
    eager message, for ids the first example that has one, then `where`."""
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
