"""Keeps a model's weights when `fit`/`evaluate`/`predict` fail on JAX.

Keras' JAX trainer detaches every variable's value while it runs (it passes the
state to its compiled step functions and re-attaches it at the end). When the
data raise mid-run (e.g. a bad label found by kzoo's tf.data checks), the
values stay detached: the model is unusable afterwards ("'NoneType' object is
not callable"). This is the only backend-specific module of the task models:
on other backends it does nothing.
"""

import contextlib

import keras


def _all_variables(model):
    optimizer = getattr(model, "optimizer", None)
    variables = list(model.variables) + list(getattr(model, "metrics_variables", []))
    if optimizer is not None and optimizer.built:
        variables += list(optimizer.variables)
    return list({id(v): v for v in variables}.values())


@contextlib.contextmanager
def keep_state_on_error(model):
    """Re-attaches `model`'s variables if the block raises (JAX only).

    The state after the last completed step is restored (Keras keeps it as
    `model._jax_state`); if no step completed, the values from before the call.

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
    if keras.backend.backend() != "jax":
        yield
        return
    before = [(v, v._value) for v in _all_variables(model)]  # references, no copies
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
