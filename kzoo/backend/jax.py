"""JAX's process set-up: no accelerator suggestion when only its CPU backend exists.

With no accelerator plugin installed (kzoo's `jax` extra installs the CPU
jaxlib), JAX runs on the CPU whatever `JAX_PLATFORMS` says, but on a machine
with an NVIDIA GPU or a TPU it logs "An NVIDIA GPU may be present on this
machine, but a CUDA-enabled jaxlib is not installed. Falling back to cpu" at
its first op. `cpu_when_only_cpu` names the CPU platform in that case, which
skips the suggestion and changes nothing else. Undo with `JAX_PLATFORMS=""`
(or any value) in the environment, or install an accelerator plugin.
"""

import importlib.metadata
import importlib.util
import os
import pkgutil

PLATFORMS_VARIABLE = "JAX_PLATFORMS"


def only_cpu_installed():
    """True when JAX can only run on the CPU: no PJRT plugin (`jax_plugins`
    package or entry point, e.g. jax-cuda12-plugin), no libtpu, no plugin path
    in the environment.

    Example:

    >>> isinstance(only_cpu_installed(), bool)
    True
    """
    if os.environ.get("PJRT_NAMES_AND_LIBRARY_PATHS") or os.environ.get("TPU_LIBRARY_PATH"):
        return False
    if importlib.util.find_spec("libtpu") is not None:
        return False
    if importlib.util.find_spec("jax_plugins") is not None:
        import jax_plugins  # noqa: PLC0415

        if any(True for _ in pkgutil.iter_modules(jax_plugins.__path__)):
            return False
    return not importlib.metadata.entry_points(group="jax_plugins")


def cpu_when_only_cpu():
    """Sets JAX's platforms to "cpu" when `only_cpu_installed` and the user set
    none (before JAX starts its backends; a no-op afterwards). Returns whether
    it did.

    Example:

    >>> import jax, keras  # `import kzoo` ran it on the jax backend
    >>> keras.backend.backend() != "jax" or not only_cpu_installed() or jax.config.jax_platforms == "cpu"
    True
    """
    if PLATFORMS_VARIABLE in os.environ or not only_cpu_installed():
        return False
    import jax  # noqa: PLC0415

    if jax.config.jax_platforms:
        return False
    jax.config.update("jax_platforms", "cpu")
    return True
