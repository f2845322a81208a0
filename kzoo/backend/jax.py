"""JAX: a model's weights kept when `fit`/`predict` fail, a failing check
inside a compiled step, dropout's random numbers from XLA's ThreeFry op.
Reads the private `variable._value`, `model._jax_state`,
`model._jax_state_synced` and `model.jax_state_sync()` (see `kzoo.backend`).
"""

import contextlib


@contextlib.contextmanager
def restore_state_on_error(model):
    """Re-attaches `model`'s variables if the block raises. Keras' JAX trainer
    detaches every variable's value while it runs and re-attaches it at the
    end; when the data raise mid-run they stay detached and the model is
    unusable ("'NoneType' object is not callable"). Restores the state after
    the last completed step (`model._jax_state`), or the values from before
    the call if no step completed."""
    optimizer = getattr(model, "optimizer", None)
    variables = list(model.variables) + list(getattr(model, "metrics_variables", []))
    if optimizer is not None and optimizer.built:
        variables += list(optimizer.variables)
    before = {}  # id -> (variable, value): references, no copies
    for variable in variables:
        before[id(variable)] = (variable, variable._value)
    try:
        yield
    except BaseException:
        if getattr(model, "_jax_state", None) and not getattr(model, "_jax_state_synced", True):
            model.jax_state_sync()
        for variable, value in before.values():
            if variable._value is None:
                variable._value = value
        model._jax_state = None
        model._jax_state_synced = True
        raise


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
    """Inside `jax.jit`: a host callback that raises `error_for(*values)`
    (NumPy values) unless it is None, failing the compiled step at once with
    that message, and `LOST_WEIGHTS`, inside a `jax.errors.JaxRuntimeError`.
    Keras' steps donate the weights: a failed step loses them (see
    `kzoo.backend`).

    Example:

    >>> import jax, jax.numpy as jnp
    >>> def step(x):
    ...     raise_in_step(lambda top: ValueError(f"got {top}") if top > 4 else None, jnp.max(x))
    ...     return x + 1
    >>> jax.jit(step)(jnp.array([1, 2])).tolist()
    [2, 3]
    """
    import jax  # noqa: PLC0415

    def callback(*arrays):
        error = error_for(*arrays)
        if error is not None:
            raise type(error)(f"{error}{LOST_WEIGHTS}")

    jax.debug.callback(callback, *values)


def uniform_threefry(shape, seed):
    """float32 numbers uniform in [0, 1) from XLA's own ThreeFry op
    (`jax.lax.rng_bit_generator`), for dropout masks: 3x faster than
    `jax.random.uniform`, whose ThreeFry XLA compiles from elementwise rounds
    (2.7 vs 8.3 ms for 8 x 128 x 1536 numbers, 2026-11-26, Intel Xeon with
    AVX-512, 2 cores). `seed`: Keras' seed on JAX (a `SeedGenerator`'s two
    uint32 words), taken as the ThreeFry key with a zero counter. Each number
    has 23 random bits (a float32 mantissa).
    """
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415

    key = jnp.concatenate([jnp.asarray(seed).astype("uint32").reshape(2), jnp.zeros(2, "uint32")])
    _, bits = jax.lax.rng_bit_generator(key, tuple(shape), jnp.uint32, jax.lax.RandomAlgorithm.RNG_THREE_FRY)
    # 23 random bits as the mantissa of a float in [1, 2), minus 1.
    return jax.lax.bitcast_convert_type((bits >> 9) | jnp.uint32(0x3F800000), jnp.float32) - 1.0
