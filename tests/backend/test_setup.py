"""`import kzoo` leaves the process as it found it (kzoo.backend): no file
descriptor, `gc`, environment, TensorFlow or JAX setting changes, only
torch's intra-op thread count on the torch backend (`set_torch_threads`).
Fresh processes with only PATH, HOME and KERAS_BACKEND set, the frameworks
imported first: what they change at import is theirs."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import keras

ROOT = Path(__file__).resolve().parents[2]
BACKEND = keras.backend.backend()

STATE = """
    import gc, json, os, sys
    import keras, tensorflow as tf
    framework = {"torch": "torch", "jax": "jax"}.get(keras.backend.backend())
    module = __import__(framework) if framework else None

    def state():
        return {
            "fds": {fd: os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
                    if os.path.exists(f"/proc/self/fd/{fd}")},
            "gc": [gc.collect.__module__, gc.collect.__name__, gc.isenabled(), gc.get_threshold()],
            "environ": dict(os.environ),
            "torch_threads": module.get_num_threads() if framework == "torch" else None,
            "jax_platforms": module.config.jax_platforms if framework == "jax" else None,
            "tf_threads": [tf.config.threading.get_inter_op_parallelism_threads(),
                           tf.config.threading.get_intra_op_parallelism_threads()],
        }

    before = state()
    import kzoo
    after = state()
    with_omp = None
    if framework == "torch":  # a user's OMP_NUM_THREADS (torch reads it as it starts), above kzoo's own count
        chosen = len(os.sched_getaffinity(0))
        os.environ["OMP_NUM_THREADS"] = str(chosen)
        module.set_num_threads(chosen)
        with_omp = [chosen, kzoo.backend.set_torch_threads()]
    print(json.dumps({"before": before, "after": after, "cpus": len(os.sched_getaffinity(0)), "with_omp": with_omp}))
    # TensorFlow's devices are still the user's to choose: this raises once TensorFlow has started.
    tf.config.set_visible_devices(tf.config.list_physical_devices("CPU"), "CPU")
"""


def run_clean(code, **environment):
    """Runs `code` in a fresh Python with a clean environment; returns its stdout."""
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "PYTHONPATH": str(ROOT),
           "KERAS_BACKEND": BACKEND, **environment}
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True,
                            text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.splitlines()[-1])


def test_import_kzoo_changes_no_process_state_but_torchs_documented_thread_count():
    result = run_clean(STATE)
    before, after = result["before"], result["after"]
    threads_before = before.pop("torch_threads")
    threads_after = after.pop("torch_threads")
    assert after == before
    if BACKEND == "torch":
        assert threads_after == max(1, min(threads_before, result["cpus"] - 1))
        # The user's count stands: OMP_NUM_THREADS (read by torch itself), checked in the same process
        # (a second one cost 8-9 s of CPU): what `import kzoo` ran, run again with the variable set.
        chosen, kept = result["with_omp"]
        assert kept == chosen
    else:
        assert threads_after is None
