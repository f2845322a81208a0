"""Run in a subprocess, on another backend, by `run_on_other_backend`
(`test_bert_backbone.py::test_weights_and_preset_load_on_another_backend`).

Usage: KERAS_BACKEND=<backend> python cross_backend_script.py <case_dir>

`<case_dir>` holds `case.npz` (the inputs and the outputs another backend
computed), `config.json` (BertBackbone constructor arguments) with
`w.weights.h5` (saved on that backend), and `preset/` (the same backbone's
`save_to_preset`). This script rebuilds the backbone on its own backend both
ways, runs the same inputs, and prints one JSON line with the backend name and,
per way, the largest absolute differences. One process for both: a fresh
interpreter costs 7-8 s of CPU.
"""

import json
import os
import subprocess
import sys

import keras
import numpy as np
from keras import ops

from kzoo import BertBackbone


def run_on_other_backend(case_dir):
    """Runs this script on `case_dir` under the backend after the current one in
    (tensorflow, jax, torch), cyclically: the three runs together save on every
    backend and load on every backend. Returns its JSON report."""
    backends = ("tensorflow", "jax", "torch")
    other = backends[(backends.index(keras.backend.backend()) + 1) % len(backends)]
    script = os.path.abspath(__file__)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(script))))
    env = dict(os.environ, KERAS_BACKEND=other, TF_CPP_MIN_LOG_LEVEL="3")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    run = subprocess.run(
        [sys.executable, script, str(case_dir)], env=env, cwd=root, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, f"{other}:\n{run.stdout}\n{run.stderr[-3000:]}"
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["backend"] == other
    return report


def differences(backbone, case):
    """Largest absolute differences of `backbone`'s outputs from the case's, and the largest output."""
    outputs = backbone({name: case[name] for name in ("token_ids", "segment_ids", "padding_mask")})
    sequence = ops.convert_to_numpy(outputs["sequence_output"]).astype("float64")
    pooled = ops.convert_to_numpy(outputs["pooled_output"]).astype("float64")
    return {
        "sequence_max_abs_diff": float(np.max(np.abs(sequence - case["sequence_output"]))),
        "pooled_max_abs_diff": float(np.max(np.abs(pooled - case["pooled_output"]))),
        "sequence_max_abs": float(np.max(np.abs(sequence))),
    }


def main(case_dir):
    case = np.load(os.path.join(case_dir, "case.npz"))
    with open(os.path.join(case_dir, "config.json")) as f:
        from_weights = BertBackbone(**json.load(f))
    from_weights.load_weights(os.path.join(case_dir, "w.weights.h5"))
    from_preset = BertBackbone.from_preset(os.path.join(case_dir, "preset"))
    print(json.dumps({"backend": keras.backend.backend(), "weights": differences(from_weights, case),
                      "preset": differences(from_preset, case)}))


if __name__ == "__main__":
    main(*sys.argv[1:])
