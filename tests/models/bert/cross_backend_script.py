"""Run in a subprocess by `test_bert_backbone.py::test_cross_backend_weights`.

Usage: KERAS_BACKEND=<backend> python cross_backend_script.py <case_dir>

`<case_dir>` holds `config.json` (BertBackbone constructor arguments),
`w.weights.h5` (saved on another backend) and `case.npz` (the inputs and the
outputs that backend computed). This script rebuilds the same configuration on
its own backend, loads the weights, runs the same inputs, and prints one JSON
line with the backend name and the largest absolute differences.
"""

import json
import os
import sys

import keras
import numpy as np
from keras import ops

from kzoo import BertBackbone


def main(case_dir):
    with open(os.path.join(case_dir, "config.json")) as f:
        config = json.load(f)
    case = np.load(os.path.join(case_dir, "case.npz"))
    backbone = BertBackbone(**config)
    backbone.load_weights(os.path.join(case_dir, "w.weights.h5"))
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
    main(sys.argv[1])
