"""Run in a subprocess, once per other backend, by `run_on_other_backends`
(`test_bert_backbone.py::test_cross_backend_weights`,
`test_preset_directories.py::test_cross_backend_preset`).

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


def run_on_other_backends(*args):
    """Runs this script with `args` under the two backends other than the
    current one, side by side; returns their JSON reports."""
    this = keras.backend.backend()
    others = [b for b in ("tensorflow", "jax", "torch") if b != this]
    assert len(others) == 2
    script = os.path.abspath(__file__)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(script))))
    runs = {}
    for other in others:
        env = dict(os.environ, KERAS_BACKEND=other, TF_CPP_MIN_LOG_LEVEL="3")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        runs[other] = subprocess.Popen(
            [sys.executable, script, *map(str, args)],
            env=env,
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    reports = []
    for other, run in runs.items():
        stdout, stderr = run.communicate(timeout=300)
        assert run.returncode == 0, f"{other}:\n{stdout}\n{stderr[-3000:]}"
        report = json.loads(stdout.strip().splitlines()[-1])
        assert report["backend"] == other
        reports.append(report)
    return reports


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
