"""ONNX for the network of a kzoo model, its tokenizer's files beside it.

`export_onnx(model, path)` writes a directory:

- `model.onnx`: the network (the task's functional graph in inference mode),
  from packed ids to its outputs, for any batch size and any sequence length
  up to the position table, traced on the running Keras backend
  (`kzoo.export.onnx_tracing`) and checked with onnxruntime against the Keras
  model on a sample batch: outputs equal to `TOLERANCE` (1e-4), or nothing
  is written.
- `vocabulary.txt`: the tokenizer's WordPiece vocabulary, one token a line,
  line i holding id i (BERT sec. 3).
- `onnx_config.json`: what a caller needs to feed the graph from text with
  any WordPiece implementation: the tokenizer's settings (`lowercase`,
  `strip_accents`, ...), the packing (`sequence_length`, the special tokens'
  ids, BERT's `[CLS] A [SEP] B [SEP]` layout), the graph's input and output
  names, shapes and dtypes, and the label names (`class_names`, `tags`).

With `int8=True`, `model.onnx` holds int8 weights (per output channel) and
quantizes its activations as it runs (onnxruntime's dynamic quantization):
1.5-1.6x the float graph's speed on a CPU core, about a quarter of its size;
the config records the largest difference from the float outputs.

The tokenizer is not in the graph: ONNX has no WordPiece (a TensorFlow
SavedModel, `format="tf_saved_model"`, holds it). Serving needs
`onnxruntime` (or any ONNX runtime) and a WordPiece tokenizer, not kzoo,
Keras or the backend. Out-of-range ids fail in the runtime's own words
(onnxruntime's `Gather`), not kzoo's.
"""

import importlib.util
import json
import os

import keras
import numpy as np

from kzoo.backend import checked_upstream
from kzoo.data.padding_ladder import length_ladder
from kzoo.export import onnx_tracing
from kzoo.export.onnx_tracing import InputSpec
from kzoo.models import input_checks
from kzoo import atomic

MODEL_FILE = "model.onnx"
VOCABULARY_FILE = "vocabulary.txt"
CONFIG_FILE = "onnx_config.json"
TOLERANCE = 1e-4  # largest difference allowed between onnxruntime's outputs and Keras'
INSTALL = 'pip install "kzoo[export]"'
REQUIREMENTS = {"tensorflow": ("tf2onnx",), "jax": ("jax2onnx",), "torch": ("onnxscript",)}  # the tracers
# The name of a single-output model's output in the graph, by kzoo class (others: "logits").
SINGLE_OUTPUTS = {"BertTextEmbedder": "embeddings"}
SPECIAL_TOKEN_IDS = ("cls_token_id", "sep_token_id", "pad_token_id", "mask_token_id", "unknown_token_id")


def export_onnx(model, path, opset=None, int8=False):
    """Writes `model`'s network as `model.onnx`, with its tokenizer's
    vocabulary and settings beside it (see the module docstring).

    Args:
        model: `kzoo.models.Task` or `kzoo.models.Backbone`. A model whose
            inputs are packed ids (a dict of int tensors), e.g. a
            `kzoo.BertClassifier`, float32, or quantized to int8 (its
            `quantize("int8")`) on TensorFlow.
        path: str or os.PathLike. A new or empty directory, or an earlier
            export (replaced once the new one is complete and checked).
        opset: int or None. The ONNX opset. Defaults to `None`: the
            exporter's own (recorded in `onnx_config.json`).
        int8: bool. Quantize the checked float graph's weights to int8
            (`onnxruntime.quantization.quantize_dynamic`, per output
            channel), its activations as it runs. Defaults to `False`.

    Returns:
        The config written to `onnx_config.json` (a dict).

    Example:

    >>> import os, tempfile
    >>> import onnxruntime
    >>> from kzoo import BertBackbone, BertClassifier, BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad"])
    >>> backbone = BertBackbone(vocabulary_size=7, num_layers=1, num_heads=2, hidden_dim=8,
    ...                         intermediate_dim=16, max_sequence_length=8)
    >>> model = BertClassifier(backbone, class_names=["bad", "good"], preprocessor=tokenizer)
    >>> path = os.path.join(tempfile.mkdtemp(), "classifier")
    >>> config = export_onnx(model, path)
    >>> sorted(os.listdir(path))
    ['model.onnx', 'onnx_config.json', 'vocabulary.txt']
    >>> config["inputs"][0], config["packing"]["sequence_length"], config["labels"]
    ({'name': 'token_ids', 'dtype': 'int32', 'shape': ['batch', 'sequence_length']}, 8, {'class_names': ['bad', ...
    >>> session = onnxruntime.InferenceSession(os.path.join(path, "model.onnx"))
    >>> packed = {k: v.numpy() for k, v in model.preprocessor(["good", "bad good"]).items()}
    >>> logits = session.run(["logits"], packed)[0]
    >>> bool(np.allclose(logits, model.predict(packed, verbose=0), atol=1e-4))
    True
    """
    specs, outputs = _check_model(model)
    exporter = onnx_tracing.EXPORTERS[keras.backend.backend()]
    _require("onnx", "onnxruntime", *REQUIREMENTS[keras.backend.backend()])
    with atomic.replacing_directory(path) as scratch:
        onnx_path = os.path.join(scratch, MODEL_FILE)
        with checked_upstream(), onnx_tracing.quiet():
            exporter(model, specs, outputs, onnx_path, opset)
        difference = _check_outputs(model, onnx_path, specs, outputs)
        config = _serving_config(model, specs, outputs, onnx_path, difference)
        if int8:
            config["quantization"] = _quantized(model, onnx_path, specs, outputs)
        tokenizer = getattr(getattr(model, "preprocessor", None), "tokenizer", None)
        if tokenizer is not None:
            with open(os.path.join(scratch, VOCABULARY_FILE), "w", encoding="utf-8") as f:
                f.write("".join(f"{token}\n" for token in tokenizer.get_vocabulary()))
        with open(os.path.join(scratch, CONFIG_FILE), "w", encoding="utf-8") as f:
            json.dump(config, f, indent=2, ensure_ascii=False)
    return config


def _require(*modules):
    """An `ImportError` naming the extra to install when an exporter is missing."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        raise ImportError(
            f"Exporting to ONNX on {keras.backend.backend()} needs {', '.join(missing)}: {INSTALL}."
        )


def _check_model(model):
    """`(input specs, output names)`, or a `ValueError` for a model this export cannot take."""
    inputs = getattr(model, "input", None) if getattr(model, "built", False) else None
    owner = type(model).__name__
    if not isinstance(model, keras.Model) or not isinstance(inputs, dict):
        raise ValueError(
            f"export_onnx takes a kzoo task or backbone, a Keras model with named inputs (a dict of "
            f"packed ids); got {owner}."
        )
    policy = model.dtype_policy.name
    if policy != "float32":
        raise ValueError(
            f"{owner} computes in {policy}; export a float32 model (quantized to int8 or not): "
            f"rebuild it with dtype='float32', e.g. kzoo.{owner}.from_preset(path, dtype='float32')."
        )
    if keras.backend.backend() != "tensorflow" and any(layer.quantization_mode for layer in model._flatten_layers()):
        # jax2onnx writes int8 Einsums onnxruntime cannot run; torch.export fixes a shape of the int8 lookup.
        raise ValueError(
            f"This {owner} is quantized: its ONNX export runs on TensorFlow only. Save it "
            "(save_to_preset) and export it under KERAS_BACKEND=tensorflow, where the preset loads "
            "as it is, or export the float model."
        )
    return input_specs(model), output_names(model)


def input_specs(model):
    """The graph's `InputSpec`s: the model's inputs, their batch named
    `batch` and the backbone inputs' last axis `sequence_length` (at most the
    position table), any other unknown axis after its input.

    Example:

    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=9, num_layers=1, num_heads=2, hidden_dim=8,
    ...                         intermediate_dim=16, max_sequence_length=16)
    >>> input_specs(backbone)[0]
    InputSpec(name='token_ids', dtype='int32', dims=(('batch', None), ('sequence_length', 16)))
    """
    backbone = getattr(model, "backbone", model)
    longest = getattr(backbone, "max_sequence_length", None)
    shared = set(backbone.input) if isinstance(backbone.input, dict) else set()
    specs = []
    for name, tensor in model.input.items():
        dims = []
        for axis, size in enumerate(tensor.shape):
            if size is not None:
                dims.append(int(size))
            elif axis == 0:
                dims.append(("batch", None))
            elif name in shared and axis == len(tensor.shape) - 1:
                dims.append(("sequence_length", longest))
            else:
                dims.append((f"{name}_{axis}", longest))
        specs.append(InputSpec(name, keras.backend.standardize_dtype(tensor.dtype), tuple(dims)))
    return specs


def output_names(model):
    """The graph's outputs: a dict's keys; a single output's name in
    `SINGLE_OUTPUTS` for its kzoo class (`embeddings`, as the SavedModel
    serves them), else `logits` (a task's scores; a regression's values).

    Example:

    >>> from kzoo import BertBackbone, BertTextEmbedder
    >>> backbone = BertBackbone(vocabulary_size=9, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
    >>> output_names(backbone), output_names(BertTextEmbedder(backbone))
    (['sequence_output', 'pooled_output'], ['embeddings'])
    """
    if isinstance(model.output, dict):
        return list(model.output)
    names = [SINGLE_OUTPUTS[cls.__name__] for cls in type(model).__mro__
             if cls.__name__ in SINGLE_OUTPUTS and cls.__module__.startswith("kzoo.")]
    return names[:1] or ["logits"]


def _quantized(model, onnx_path, specs, outputs):
    """Replaces the float graph at `onnx_path` by its dynamically quantized
    int8 version; returns what the config records of it."""
    import onnx  # noqa: PLC0415
    import onnxruntime  # noqa: PLC0415
    from onnxruntime.quantization import QuantType, quantize_dynamic  # noqa: PLC0415

    float_path = onnx_path + ".float"
    options = onnxruntime.SessionOptions()  # constant folding: weights that are reshaped as the graph runs
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = float_path
    onnxruntime.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
    graph = onnx.load(float_path)
    _gemms_as_matmuls(graph.graph)
    onnx.save(graph, float_path)
    quantize_dynamic(float_path, onnx_path, weight_type=QuantType.QInt8, per_channel=True)
    os.remove(float_path)
    return {
        "weights": "int8, one scale per output channel",
        "activations": "uint8, quantized as the graph runs (onnxruntime's dynamic quantization)",
        "largest_difference_from_keras": _check_outputs(model, onnx_path, specs, outputs, tolerance=None),
    }


def _gemms_as_matmuls(graph):
    """`Gemm` nodes of a constant weight (the exporters' 2-D dense layers and
    attention projections) as `MatMul` and `Add`, in place: onnxruntime's
    dynamic quantization takes `MatMul` only."""
    from onnx import helper, numpy_helper  # noqa: PLC0415

    weights = {tensor.name: tensor for tensor in graph.initializer}
    nodes = []
    for node in graph.node:
        settings = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        biased = len(node.input) > 2 and node.input[2]
        if (node.op_type != "Gemm" or node.input[1] not in weights or settings.get("transA", 0)
                or settings.get("alpha", 1.0) != 1.0 or (biased and settings.get("beta", 1.0) != 1.0)):
            nodes.append(node)
            continue
        weight = numpy_helper.to_array(weights[node.input[1]])
        weight = weight.T if settings.get("transB", 0) else weight
        graph.initializer.append(numpy_helper.from_array(weight, f"{node.name}_weight"))
        product = f"{node.output[0]}_product" if biased else node.output[0]
        nodes.append(helper.make_node("MatMul", [node.input[0], f"{node.name}_weight"], [product],
                                      name=f"{node.name}_matmul"))
        if biased:
            nodes.append(helper.make_node("Add", [product, node.input[2]], [node.output[0]], name=f"{node.name}_add"))
    del graph.node[:]
    graph.node.extend(nodes)
    used = {name for node in nodes for name in node.input}
    for tensor in [tensor for tensor in graph.initializer if tensor.name not in used]:  # the Gemms' weights
        graph.initializer.remove(tensor)


def _check_outputs(model, onnx_path, specs, outputs, tolerance=TOLERANCE):
    """The largest difference between onnxruntime's outputs and the Keras
    model's on sample batches of two shapes; a `RuntimeError` above `tolerance`
    (None: not checked)."""
    import onnxruntime  # noqa: PLC0415

    session = onnxruntime.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    backbone = getattr(model, "backbone", model)
    limits = backbone.input_limits() if hasattr(backbone, "input_limits") else {}
    tables = {name: limit.size for name, found in limits.items() for limit in found if hasattr(limit, "size")}
    largest = 0.0
    for batch, length in ((3, 5), (1, 11)):
        samples = onnx_tracing.sample_inputs(specs, tables, length=length, batch=batch)
        expected = onnx_tracing.model_function(model, specs, outputs)(*samples.values())
        actual = session.run(outputs, samples)
        for name, e, a in zip(outputs, expected, actual):
            difference = float(np.max(np.abs(keras.ops.convert_to_numpy(e) - a), initial=0.0))
            if tolerance is not None and not difference <= tolerance:
                raise RuntimeError(
                    f"The ONNX graph of {type(model).__name__} computes `{name}` differently from the "
                    f"Keras model ({difference:.2g} apart, more than {tolerance:g}) on "
                    f"{keras.backend.backend()}; nothing was written. Please report it to kzoo."
                )
            largest = max(largest, difference)
    return largest


def _serving_config(model, specs, outputs, onnx_path, difference):
    """The contents of `onnx_config.json` (see the module docstring)."""
    import onnx  # noqa: PLC0415

    graph = onnx.load(onnx_path, load_external_data=False)
    opsets = {entry.domain or "ai.onnx": entry.version for entry in graph.opset_import}
    config = {
        "model_file": MODEL_FILE,
        "model_class": type(model).__name__,
        "inputs": [
            {"name": s.name, "dtype": s.dtype, "shape": [d if isinstance(d, int) else d[0] for d in s.dims]}
            for s in specs
        ],
        "outputs": [{"name": name, "dtype": "float32"} for name in outputs],
        "max_sequence_length": getattr(getattr(model, "backbone", model), "max_sequence_length", None),
        "labels": {name: getattr(model, name) for name in input_checks.ARGUMENTS if getattr(model, name, None)},
        "opset": opsets.get("ai.onnx"),
        "exported_on": keras.backend.backend(),
        "largest_difference_from_keras": difference,
    }
    preprocessor = getattr(model, "preprocessor", None)
    if preprocessor is not None:
        tokenizer = preprocessor.tokenizer
        settings = {k: v for k, v in tokenizer.get_config().items() if k != "vocabulary"}
        config["tokenizer"] = {"type": "WordPiece", "vocabulary_file": VOCABULARY_FILE, **settings}
        packing = {k: v for k, v in preprocessor.get_config().items() if k != "tokenizer"}
        ids = {name: getattr(tokenizer, name) for name in SPECIAL_TOKEN_IDS if hasattr(tokenizer, name)}
        config["packing"] = {
            "preprocessor": type(preprocessor).__name__,
            **packing,
            **ids,
            "layout": "[CLS] A [SEP] for one text, [CLS] A [SEP] B [SEP] for a pair, then [PAD] up to "
            "sequence_length; segment_ids 0 up to the first [SEP], 1 after; padding_mask 1 on tokens, "
            "0 on [PAD]; a pair too long is cut longest-first; with padding 'longest', a batch may be "
            "padded only to the first of ladder_lengths that holds its longest text (same outputs at the tokens)",
            "ladder_lengths": length_ladder(preprocessor.sequence_length) if hasattr(preprocessor, "sequence_length")
            else None,
        }
    return config
