"""`import kzoo` leaves the process as it found it (kzoo.backend): no file
descriptor, `gc`, environment, TensorFlow, JAX or torch setting changes.
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
    print(json.dumps({"before": before, "after": after}))
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


def test_import_kzoo_changes_no_process_state():
    result = run_clean(STATE)
    assert result["after"] == result["before"]
    assert (result["after"]["torch_threads"] is None) == (BACKEND != "torch")  # torch's count was compared
