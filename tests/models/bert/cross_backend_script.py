"""Run in a subprocess, on another backend, by `run_on_other_backend`
(`test_bert_backbone.py::test_cross_backend_weights`,
`tests/presets/test_directory.py::test_cross_backend_preset`).

Usage: KERAS_BACKEND=<backend> python cross_backend_script.py <case_dir> [<preset_dir>]

`<case_dir>` holds `case.npz` (the inputs and the outputs another backend
computed) and, without `<preset_dir>`, `config.json` (BertBackbone constructor
arguments) and `w.weights.h5` (saved on that backend). This script rebuilds the
backbone on its own backend (`BertBackbone.from_preset(<preset_dir>)` when a
preset directory is given), runs the same inputs, and prints one JSON line with
the backend name and the largest absolute differences.
"""

import json
import os
import subprocess
import sys

import keras
import numpy as np
from keras import ops

from kzoo import BertBackbone


def run_on_other_backend(*args, step):
    """Runs this script with `args` under another backend: the one `step`
    places after the current one in (tensorflow, jax, torch), cyclically;
    returns its JSON report. The weights test reads on the next backend and
    the preset test on the previous one, so that one backend's run checks
    both directions and the three runs together every pair."""
    backends = ("tensorflow", "jax", "torch")
    other = backends[(backends.index(keras.backend.backend()) + step) % len(backends)]
    script = os.path.abspath(__file__)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(script))))
    env = dict(os.environ, KERAS_BACKEND=other, TF_CPP_MIN_LOG_LEVEL="3")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    run = subprocess.run(
        [sys.executable, script, *map(str, args)], env=env, cwd=root, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, f"{other}:\n{run.stdout}\n{run.stderr[-3000:]}"
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["backend"] == other
    return report


def load_backbone(case_dir, preset_dir=None):
    if preset_dir is not None:
        return BertBackbone.from_preset(preset_dir)
    with open(os.path.join(case_dir, "config.json")) as f:
        backbone = BertBackbone(**json.load(f))
    backbone.load_weights(os.path.join(case_dir, "w.weights.h5"))
    return backbone


def main(case_dir, preset_dir=None):
    case = np.load(os.path.join(case_dir, "case.npz"))
    backbone = load_backbone(case_dir, preset_dir)
    inputs = {
        "token_ids": case["token_ids"],
        "segment_ids": case["segment_ids"],
        "padding_mask": case["padding_mask"],
    }
    outputs = backbone(inputs)
    sequence = ops.convert_to_numpy(outputs["sequence_output"]).astype("float64")
    pooled = ops.convert_to_numpy(outputs["pooled_output"]).astype("float64")
    print(
        json.dumps(
            {
                "backend": keras.backend.backend(),
                "sequence_max_abs_diff": float(np.max(np.abs(sequence - case["sequence_output"]))),
                "pooled_max_abs_diff": float(np.max(np.abs(pooled - case["pooled_output"]))),
                "sequence_max_abs": float(np.max(np.abs(sequence))),
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:])
