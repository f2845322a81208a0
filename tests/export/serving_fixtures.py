"""What the SavedModel tests share: serving exported models in a fresh
process without kzoo (`serve_without_kzoo.py`), and tiny models to export."""

import json
import os
import subprocess
import sys

import numpy as np

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "serve_without_kzoo.py")


def serve_without_kzoo(requests):
    """`serving_default`'s outputs for each `{"path", "inputs"}` request, from a
    new process that imports TensorFlow and tensorflow-text's ops only (see
    serve_without_kzoo.py), which must not have loaded kzoo nor Keras."""
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KERAS_BACKEND")}
    environment["TF_CPP_MIN_LOG_LEVEL"] = "2"
    result = subprocess.run([sys.executable, SCRIPT], input=json.dumps(requests), capture_output=True,
                            text=True, env=environment, cwd=os.path.dirname(SCRIPT), timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["blocked_modules_loaded"] == [], report["blocked_modules_loaded"]
    return [{name: np.asarray(value) if not _strings(value) else value for name, value in outputs.items()}
            for outputs in report["outputs"]]


def _strings(value):
    while isinstance(value, list) and value:
        value = value[0]
    return isinstance(value, str)


def softmax(logits):
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)
