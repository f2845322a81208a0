"""JAX: a model's weights kept when `fit`/`predict` fail, a failing check
inside a compiled step, predict steps that leave the variables in place,
dropout's random numbers from XLA's ThreeFry op, compiled searches, compiled
without XLA:CPU's YNNPACK fusions (an experimental XLA option, checked on
jaxlib 0.10.2, left out where a jaxlib lacks it). Reads the private
`variable._value`, `model._jax_state`, `model._jax_state_synced` and
`model.jax_state_sync()`, and calls Keras' JAX `predict_step(state, data)`
(see `kzoo.backend`).
"""

import contextlib
import functools

import keras
import numpy as np


@contextlib.contextmanager
def restore_state_on_error(model):
    """Re-attaches `model`'s variables if the block raises (Keras' JAX trainer
    detaches them while it runs): the state after the last completed step
    (`model._jax_state`), or the values from before the call."""
    optimizer = getattr(model, "optimizer", None)
    variables = list(model.variables) + list(getattr(model, "metrics_variables", []))
    if optimizer is not None and optimizer.built:
        variables += list(optimizer.variables)
    before = [(variable, variable._value) for variable in variables]  # references, no copies
    try:
        yield
    except BaseException:
        if getattr(model, "_jax_state", None) and not getattr(model, "_jax_state_synced", True):
            model.jax_state_sync()
        for variable, value in before:
            if variable._value is None:
                variable._value = value
        model._jax_state = None
        model._jax_state_synced = True
        raise


def predict_on_batch(model, x):
    """`model.predict_on_batch(x)` as Keras' JAX trainer computes it (its
    `predict_step`, jitted once per input shape), without donating the
    variables to the step: Keras donates them all, then writes every one back
    (`jax_state_sync`), a millisecond of a one-text call. Only the
    non-trainable variables, which a predict step may update, are written back."""
    import jax  # noqa: PLC0415

    step = model.__dict__.get("_undonated_predict_step")
    if step is None:
        step = model.__dict__["_undonated_predict_step"] = jax.jit(
            model.predict_step, compiler_options=inference_compiler_options()
        )
    non_trainable = model.non_trainable_variables
    outputs, values = step(([v.value for v in model.trainable_variables], [v.value for v in non_trainable]), (x,))
    for variable, value in zip(non_trainable, values):
        variable.assign(value)
    return keras.tree.map_structure(np.asarray, outputs)


def compiled_inference(model, function):
    """`function(*arguments)` under `jax.jit`, traced once per shape and
    non-array arguments, with `model`'s variables passed in as arguments
    (mapped by a `keras.StatelessScope`), so that new weights need no new
    trace and none is baked in. Eagerly, a search's `while_loop` was traced
    and compiled anew at every call (0.75 s for 64 sentences)."""
    import jax  # noqa: PLC0415

    compiled = {}

    def run(values, arrays, fixed):
        arguments = [arrays.pop(0) if value is None else value for value in fixed]
        with keras.StatelessScope(state_mapping=list(zip(model.variables, values))):
            return function(*arguments)

    def call(*arguments):
        is_array = [isinstance(a, (jax.Array, np.ndarray)) for a in arguments]
        fixed = tuple(None if array else a for a, array in zip(arguments, is_array))
        arrays, values = [a for a, array in zip(arguments, is_array) if array], [v.value for v in model.variables]
        # Inside another trace (an export, a user's jit) only a top-level jit takes compiler options.
        nested = any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves((arrays, values)))
        step = compiled.get((fixed, nested))
        if step is None:
            step = compiled[fixed, nested] = jax.jit(
                lambda values, arrays: run(values, list(arrays), fixed),
                compiler_options=None if nested else inference_compiler_options(),
            )
        return step(values, arrays)

    return call


@functools.cache
def inference_compiler_options():
    """`jax.jit`'s `compiler_options` for kzoo's predict steps and searches:
    XLA:CPU without its YNNPACK fusions, which made a beam search step's
    hundreds of small ops 1.3x slower, greedy 1.4x, a BERT-Base forward of
    one text 1.15x (jaxlib 0.10.2, the benchmarks page); none where this
    jaxlib lacks the option (a tiny compile tells, once)."""
    import jax  # noqa: PLC0415

    options = {"xla_cpu_experimental_ynn_fusion_type": ""}
    try:
        jax.jit(lambda: 0, compiler_options=options).lower().compile()
    except jax.errors.JaxRuntimeError:  # "No such compile option"
        return {}
    return options


# Said after the message of a check that fails inside a compiled step. Only steps
# kzoo does not drive carry checks (kzoo's models check batches before their steps),
# and nothing of kzoo's runs around them to put the weights back or unwrap the error.
LOST_WEIGHTS = (
    " This step is not one of kzoo's models' (they check each batch before the step): if Keras ran it "
    "(fit, evaluate, predict), the model's weights went to the step and are lost with it, so reload them "
    "(model.load_weights) before using the model again, and check batches before the step "
    "(kzoo.models.datasets.checked(inputs, backbone.input_limits()))."
)


def raise_in_step(error_for, *values):
    """Inside `jax.jit`: a host callback that raises `error_for(*values)` (NumPy
    values) unless it is None, with `LOST_WEIGHTS`, failing the compiled step."""
    import jax  # noqa: PLC0415

    def callback(*arrays):
        error = error_for(*arrays)
        if error is not None:
            raise type(error)(f"{error}{LOST_WEIGHTS}")

    jax.debug.callback(callback, *values)


def uniform_threefry(shape, seed):
    """float32 uniform in [0, 1) from XLA's own ThreeFry op
    (`jax.lax.rng_bit_generator`), faster than `jax.random.uniform`; `seed`:
    Keras' seed on JAX (two uint32 words) as the key with a zero counter. Each
    number has 23 random bits (a float32 mantissa)."""
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415

    key = jnp.concatenate([jnp.asarray(seed).astype("uint32").reshape(2), jnp.zeros(2, "uint32")])
    _, bits = jax.lax.rng_bit_generator(key, tuple(shape), jnp.uint32, jax.lax.RandomAlgorithm.RNG_THREE_FRY)
    # 23 random bits as the mantissa of a float in [1, 2), minus 1.
    return jax.lax.bitcast_convert_type((bits >> 9) | jnp.uint32(0x3F800000), jnp.float32) - 1.0
