"""Ways out of kzoo for serving (issue: "Serving"): a TensorFlow SavedModel
with the tokenizer inside the graph, ONNX for the network, and int8 weights.

Each format has its own module; `kzoo.models.Task.export` (and
`kzoo.Transformer.export`) picks one by name from `FORMATS`.
"""

from kzoo.export.onnx import export_onnx
from kzoo.export.saved_model import export_saved_model
from kzoo.layers import lora

# Format name -> `function(model, path, **options)`.
FORMATS = {"tf_saved_model": export_saved_model, "onnx": export_onnx}


def export(model, path, format="tf_saved_model", **options):
    """Writes `model` to `path` in a serving format (`FORMATS`).

    Args:
        model: `keras.Model`. The kzoo model to export.
        path: str or os.PathLike. Where to write it.
        format: str. A name in `FORMATS`: `"tf_saved_model"`, a TensorFlow
            SavedModel that takes strings (`kzoo.export.saved_model`);
            `"onnx"`, the network as ONNX with its tokenizer's vocabulary and
            settings beside it (`kzoo.export.onnx`). Defaults to `"tf_saved_model"`.
        **options: the format's options for this model.

    Example:

    >>> from kzoo import BertBackbone, BertClassifier
    >>> backbone = BertBackbone(vocabulary_size=6, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
    >>> export(BertClassifier(backbone, num_classes=2), "classifier", format="tflite")
    Traceback (most recent call last):
    ...
    ValueError: Unknown export format 'tflite'; kzoo exports to ['onnx', 'tf_saved_model'].
    """
    if format not in FORMATS:
        raise ValueError(f"Unknown export format {format!r}; kzoo exports to {sorted(FORMATS)}.")
    if lora.adapted_layers(model):
        model = lora.merged(model)  # W0 + (alpha/r) B A in the kernels: no LoRA branch to serve
    return FORMATS[format](model, path, **options)
