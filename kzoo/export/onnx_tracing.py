"""Tracing a kzoo model into an ONNX file, one way per Keras backend.

Each function takes the model, its `InputSpec`s (`kzoo.export.onnx`: names,
dtypes and named dimensions, with the longest a dimension may be) and the
output names, and writes the file, for any batch and sequence length:

- TensorFlow: a `tf.function` converted by `tf2onnx`, with a handler for
  `Erfc` (exact GELU on TensorFlow, which tf2onnx lacks): `1 - Erf(x)`.
- JAX: `jax2onnx` (Keras' own route on JAX), on symbolic shapes whose
  lengths are bounded by the position table (`jax.export.symbolic_shape`
  constraints), so that slicing the table traces.
- torch: `torch.onnx.export(dynamo=True)` with `torch.export.Dim`s, the
  maintained exporter (Keras falls back to TorchScript for unknown shapes,
  which cannot trace a LayerNorm of unknown length).

Called inside `kzoo.backend.checked_upstream` and with the
exporters' own chatter silenced (`quiet`).
"""

import collections
import contextlib
import io
import logging
import warnings

import numpy as np

InputSpec = collections.namedtuple("InputSpec", ["name", "dtype", "dims"])
InputSpec.__doc__ = """One input of the ONNX graph: `dims` a tuple of ints (fixed) and
`(name, longest)` pairs (named dimensions of any size up to `longest`, or None)."""


def model_function(model, specs, output_names):
    """`f(*tensors) -> tuple`: `model` on its inputs in `specs` order, in
    inference mode, its outputs in `output_names` order.

    Example:

    >>> import keras
    >>> inputs = {"x": keras.Input((2,), name="x")}
    >>> model = keras.Model(inputs, {"y": keras.layers.Dense(1)(inputs["x"])})
    >>> len(model_function(model, [InputSpec("x", "float32", (("batch", None), 2))], ["y"])(np.ones((1, 2))))
    1
    """

    def function(*tensors):
        outputs = model(dict(zip((spec.name for spec in specs), tensors)), training=False)
        if not isinstance(outputs, dict):
            return (outputs,)
        return tuple(outputs[name] for name in output_names)

    return function


def sample_inputs(specs, tables=None, length=8, batch=2):
    """NumPy inputs of `specs`: `batch` rows, named dimensions `length` long
    (at most their `longest`), ids drawn from `[0, tables[name])` (0 or 1
    for inputs without a table, e.g. the padding mask).

    Args:
        specs: list of `InputSpec`. The graph's inputs.
        tables: dict or None. Input name -> the rows of its embedding table.
            Defaults to `None`: none.
        length: int. The named dimensions' length. Defaults to `8`.
        batch: int. The batch size. Defaults to `2`.

    Example:

    >>> spec = InputSpec("token_ids", "int32", (("batch", None), ("sequence_length", 4)))
    >>> sample_inputs([spec], {"token_ids": 30})["token_ids"].shape
    (2, 4)
    """
    rng = np.random.default_rng(0)
    samples = {}
    for spec in specs:
        shape = [
            d if isinstance(d, int) else batch if axis == 0 else min(length, d[1] or length)
            for axis, d in enumerate(spec.dims)
        ]
        samples[spec.name] = rng.integers(0, (tables or {}).get(spec.name, 2), size=shape).astype(spec.dtype)
    return samples


def tensorflow_to_onnx(model, specs, output_names, path, opset):
    import onnx  # noqa: PLC0415
    import tensorflow as tf  # noqa: PLC0415
    import tf2onnx  # noqa: PLC0415

    signature = [
        tf.TensorSpec([d if isinstance(d, int) else None for d in spec.dims], spec.dtype, name=spec.name)
        for spec in specs
    ]
    call = model_function(model, specs, output_names)
    function = tf.function(lambda *tensors: dict(zip(output_names, call(*tensors))), input_signature=signature)
    graph, _ = tf2onnx.convert.from_function(
        function, signature, opset=opset, custom_op_handlers={"Erfc": (_erfc, [])}
    )
    _name_dimensions(graph, specs, model, output_names)
    onnx.save(graph, str(path))


def _name_dimensions(graph, specs, model, output_names):
    """The graph's unknown dimensions named as on JAX and torch (tf2onnx
    numbers them `unk__N`): the inputs' as `specs` name them; an output's
    first `batch`, and its others `sequence_length` when that is the only
    length in the inputs."""
    for tensor, spec in zip(graph.graph.input, specs):
        for dim, named in zip(tensor.type.tensor_type.shape.dim, spec.dims):
            if not isinstance(named, int):
                dim.dim_param = named[0]
    lengths = {d[0] for spec in specs for d in spec.dims[1:] if not isinstance(d, int)}
    outputs = model.output if isinstance(model.output, dict) else {output_names[0]: model.output}
    for tensor in graph.graph.output:
        for axis, (dim, size) in enumerate(zip(tensor.type.tensor_type.shape.dim, outputs[tensor.name].shape)):
            if size is None and (axis == 0 or len(lengths) == 1):
                dim.dim_param = "batch" if axis == 0 else next(iter(lengths))


def _erfc(ctx, node, name, args):
    # tf2onnx's handler of TensorFlow's Erfc: erfc(x) = 1 - erf(x), ONNX's Erf (opset 9).
    from tf2onnx import utils  # noqa: PLC0415

    dtype = utils.map_onnx_to_numpy_type(ctx.get_dtype(node.input[0]))
    node.type = "Erf"
    one = ctx.make_const(utils.make_name(f"{name}_one"), np.array(1, dtype))
    ctx.insert_new_node_on_output("Sub", node.output[0], inputs=[one.output[0], node.output[0]])


def jax_to_onnx(model, specs, output_names, path, opset):
    import jax  # noqa: PLC0415
    import jax2onnx  # noqa: PLC0415

    bounds = {dim for spec in specs for dim in spec.dims if not isinstance(dim, int)}
    constraints = tuple(f"{name} <= {longest}" for name, longest in sorted(bounds) if longest)
    scope = jax.export.SymbolicScope(constraints)
    inputs = [
        jax.ShapeDtypeStruct(
            jax.export.symbolic_shape(", ".join(str(d) if isinstance(d, int) else d[0] for d in spec.dims),
                                      scope=scope),
            np.dtype(spec.dtype),
        )
        for spec in specs
    ]
    options = {} if opset is None else {"opset": opset}
    jax2onnx.to_onnx(
        model_function(model, specs, output_names), inputs=inputs, input_names=[spec.name for spec in specs],
        output_names=list(output_names), return_mode="file", output_path=str(path), **options,
    )


def torch_to_onnx(model, specs, output_names, path, opset):
    # torch.export traces one sample: 2 rows of 8 ids (sizes 0 and 1 would be specialised).
    import torch  # noqa: PLC0415

    call = model_function(model, specs, output_names)
    names = [spec.name for spec in specs]

    class Network(torch.nn.Module):
        # torch.onnx traces a module's `forward`, with one argument per input.
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *tensors):
            return call(*tensors)

    dims = {}
    for spec in specs:
        for dim in spec.dims:
            if not isinstance(dim, int) and dim[0] not in dims:
                dims[dim[0]] = torch.export.Dim(dim[0], max=dim[1]) if dim[1] else torch.export.Dim(dim[0])
    dynamic_shapes = {
        "tensors": tuple(
            {axis: dims[dim[0]] for axis, dim in enumerate(spec.dims) if not isinstance(dim, int)} for spec in specs
        )
    }
    samples = tuple(torch.as_tensor(value) for value in sample_inputs(specs).values())
    program = torch.onnx.export(
        Network().eval(), samples, dynamo=True, input_names=names, output_names=list(output_names),
        dynamic_shapes=dynamic_shapes, opset_version=opset, verbose=False,
    )
    program.optimize()
    program.save(str(path))


EXPORTERS = {"tensorflow": tensorflow_to_onnx, "jax": jax_to_onnx, "torch": torch_to_onnx}


@contextlib.contextmanager
def quiet():
    """Silences what the exporters print and warn on their own (progress
    lines, deprecations inside them, torch's missing torchvision): the
    export is quiet unless it fails.

    Example:

    >>> with quiet():
    ...     print("progress")
    """
    loggers = [logging.getLogger(name) for name in ("tf2onnx", "torch.onnx", "torch._dynamo", "torch.export",
                                                    "jax2onnx", "onnxscript")]
    levels = [logger.level for logger in loggers]
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        for logger in loggers:
            logger.setLevel(logging.ERROR)
        try:
            yield
        finally:
            for logger, level in zip(loggers, levels):
                logger.setLevel(level)

