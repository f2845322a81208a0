"""Shared pytest set-up: report the backend, seed every run, restore the dtype policy, keep garbage collection cheap."""

import gc
import os

# XLA's LLVM back end at optimisation level 0, the classic CPU fusion emitters,
# one LLVM module: the suite's programs are tiny and compiled once each, so the
# compile is the cost. A tiny BERT classifier's JAX first fit took 1.4 s of CPU
# at level 0, 3.2 s at level 1 (its steps run 3x slower: 36 ms against 12 at
# 64 x 24, 2026-11-28); the MLIR fusion emitters or a split module cost 1.5-2x
# more. Tests that train for many steps run under torch (`once`). Set before
# JAX/TF start XLA; the processes tests start inherit it.
os.environ["XLA_FLAGS"] = " ".join(flag for flag in (
    os.environ.get("XLA_FLAGS", ""),
    "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false --xla_cpu_parallel_codegen_split_count=1",
) if flag)

import keras
import numpy as np
import pytest

# Every test's CPU seconds, the slowest listed after the run, and the budget enforced.
pytest_plugins = ["tests.time_budget"]

# kzoo compiles with XLA on TensorFlow's CPU by default (kzoo.backend.auto_jit_compile); the
# suite's many short fits of tiny models spend more on XLA compiles than they
# save (1.7x the CPU time on the BERT task tests). tests/backend/test_fast_paths.py
# turns it back on to test the default.
os.environ.setdefault("KZOO_XLA_ON_TENSORFLOW", "0")


if keras.backend.backend() == "torch":
    import torch

    # One intra-op thread on any machine, fixed, so that results do not depend
    # on the load. tests/run_all_backends.py runs the three
    # backends' pytest processes side by side on the same cores, where torch's
    # spin-waiting OpenMP workers made small steps ~10x slower.
    torch.set_num_threads(1)


def pytest_report_header(config):
    return f"keras {keras.__version__}, backend: {keras.backend.backend()}"


if keras.backend.backend() == "tensorflow":
    # Private TensorFlow API (checked on tensorflow 2.21.0): the gradient registry's dict.
    from tensorflow.python.framework.ops import gradient_registry as _tf_gradient_registry

    @pytest.fixture(autouse=True)
    def _forget_traced_custom_gradients():
        """Drops the custom gradients a test's traced train steps registered.

        Keras' TensorFlow optimizer sums gradients with the distribution
        strategy's `all_reduce`, a `tf.custom_gradient`; traced in a graph, it
        registers its gradient function under a new name in TensorFlow's global
        registry, which keeps the whole train-step graph alive for good. Over
        the suite that was millions of objects, and Python's full garbage
        collections took 3-4 s each (182 s of the TensorFlow run). A traced
        step no longer needs the entry: its gradient ops are built when it is
        traced.
        """
        registered = set(_tf_gradient_registry._registry)
        yield
        for name in set(_tf_gradient_registry._registry) - registered:
            if name.startswith("CustomGradient-"):
                del _tf_gradient_registry._registry[name]


@pytest.fixture(scope="session")
def saved_models(tmp_path_factory):
    """tests/export's SavedModels, exported and served once per run (tests/export/saved_models.py):
    ({name: (model, path, inputs)}, {name: served outputs}); tests/examples/test_serve.py serves one too."""
    from tests.export.saved_models import export_and_serve  # noqa: PLC0415 (TensorFlow-only code)

    return export_and_serve(tmp_path_factory)


@pytest.fixture(autouse=True)
def _seed_and_policy():
    keras.utils.set_random_seed(1234)
    np.random.seed(1234)
    policy = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(policy)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "backend_independent: pure TensorFlow / NumPy data code (tokenizers, tf.data pipelines, "
        "metrics) that no Keras backend touches; run under one backend only when the backends' runs "
        "are divided (KZOO_BACKEND_INDEPENDENT_ON names it).",
    )
    config.addinivalue_line(
        "markers",
        "once: Keras code whose result no backend can change (checkpoint conversion, a callback's files, "
        "the guides' and README's snippets, a docstring example of the API) and costly to repeat; when "
        "the backends' runs are divided, they run under the backend named by KZOO_BACKEND_INDEPENDENT_ON "
        "(torch, where a test costs least). What it shows is tested on every backend elsewhere; "
        "a test that trains a task to a stated accuracy is `once`: each backend's training steps are "
        "tested on it elsewhere (a loss that falls, accumulated updates equal to the big batch's). "
        "once(backend=NAME) runs under NAME's run instead: the examples that export SavedModels run under "
        "tensorflow, where the export is traced in the process (under JAX and torch each export starts a "
        "TensorFlow process, ~8 s of CPU).",
    )


def _runs_here(item, single_backend):
    """Whether this backend's run keeps `item` when the three runs are divided:
    backend-independent and `once` tests only under `single_backend`, or the backend `once` names."""
    once = item.get_closest_marker("once")
    if once is not None and "backend" in once.kwargs:
        return keras.backend.backend() == once.kwargs["backend"]
    if item.get_closest_marker("backend_independent") or once:
        return keras.backend.backend() == single_backend
    return True


def pytest_collection_finish(session):
    """Moves what the imports made (TensorFlow, JAX, torch, Keras: 0.5-0.8
    million objects) out of the garbage collector's sight: every full
    collection would walk them again, 0.3-0.5 s each time."""
    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(config, items):
    """A run on one backend runs every test. tests/run_all_backends.py divides
    the three backends' runs by setting KZOO_BACKEND_INDEPENDENT_ON (torch):
    backend-independent and `once` tests run under that backend only, every
    other model and layer test under all three. Torch, because a test there
    costs least: no step is compiled, and the suite's models are tiny (the
    1,148 tests that run on all three took 403 s of CPU on torch, 976 s on
    TensorFlow and 1,277 s on JAX; the `once` tests 262 s under torch, 487 s
    going round the three; 2 AVX-512 cores, 2026-11-28)."""
    single_backend = os.environ.get("KZOO_BACKEND_INDEPENDENT_ON")
    if single_backend is None:
        return
    kept = [item for item in items if _runs_here(item, single_backend)]
    deselected = [item for item in items if not _runs_here(item, single_backend)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept
