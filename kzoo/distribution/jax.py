"""JAX: `keras.distribution` data and model parallelism.

Data parallelism (`keras.distribution.DataParallel`) replicates every weight
and splits each global batch over the devices. Model parallelism
(`keras.distribution.ModelParallel`) lays the devices out as a
`(batch, model)` mesh: each of the `batch` rows holds one replica of the
model, sharded over the `model` devices of its row by `layout_map`
(Megatron-style: attention heads and feed-forward units split, so the
attention and FFN blocks need one all-reduce each; embedding columns split).
Several hosts join through `keras.distribution.initialize` (TPU pod slices
and SLURM find each other; elsewhere give the coordinator's address).

JAX compiles the whole global-batch step as one program (GSPMD), so its
results are those of one device on the same global batch, to float rounding.
"""

import contextlib
import os

import jax
import keras

from kzoo.distribution.distributed import BATCH_AXIS, MODEL_AXIS, Distributed

# (regex on `variable.path`, axes): kzoo's BERT and Transformer weights, e.g.
# `transformer_layer_0/self_attention/query/kernel` (BERT) or
# `decoder_layer_0/cross_attention/key/kernel` (Transformer). Everything else
# (layer norms, output biases, pooler and task heads) is replicated.
LAYOUT_RULES = (
    # (vocabulary or positions, hidden): columns split; the tied MLM / pre-softmax
    # projection then contracts over the split axis (one all-reduce).
    (r".*_embedding/embeddings", (None, MODEL_AXIS)),
    # (hidden, heads, head_dim) and (heads, head_dim): heads split (sec. 3.2.2 of the Transformer).
    (r".*attention/(query|key|value)/kernel", (None, MODEL_AXIS, None)),
    (r".*attention/(query|key|value)/bias", (MODEL_AXIS, None)),
    # (heads, head_dim, hidden): the heads' outputs, split the same way.
    (r".*attention/attention_output/kernel", (MODEL_AXIS, None, None)),
    # FFN(x) = max(0, x W1 + b1) W2 + b2 (Transformer eq. 2): W1's columns, b1 and W2's rows split.
    (r".*feed_forward/intermediate_dense/kernel", (None, MODEL_AXIS)),
    (r".*feed_forward/intermediate_dense/bias", (MODEL_AXIS,)),
    (r".*feed_forward/output_dense/kernel", (MODEL_AXIS, None)),
)


def layout_map(device_mesh):
    """`keras.distribution.LayoutMap` sharding kzoo's BERT and Transformer
    weights along `device_mesh`'s `"model"` axis.

    The rules are `LAYOUT_RULES`: attention heads, feed-forward units and
    embedding columns split; the number of heads, `intermediate_dim` and
    `hidden_dim` must be multiples of the `"model"` axis size.

    Example (pure bookkeeping: runs on any backend):

    >>> import keras
    >>> mesh = keras.distribution.DeviceMesh(
    ...     (2, 4), ("batch", "model"), devices=[f"cpu:{i}" for i in range(8)])
    >>> layouts = layout_map(mesh)
    >>> layouts["transformer_layer_0/self_attention/query/kernel"].axes
    (None, 'model', None)
    >>> layouts["decoder_layer_5/feed_forward/output_dense/kernel"].axes
    ('model', None)
    >>> layouts["transformer_layer_0/self_attention_layer_norm/gamma"] is None   # replicated
    True
    """
    layouts = keras.distribution.LayoutMap(device_mesh)
    for pattern, axes in LAYOUT_RULES:
        layouts[pattern] = axes
    return layouts


class JaxDistributed(Distributed):
    """A `keras.distribution.DataParallel` or `ModelParallel`.

    `scope()` is the distribution's scope: weights built in it are replicated
    or sharded, and `fit` inside it splits each global batch along the
    `"batch"` axis (and, on several hosts, across processes). Built by
    `kzoo.distribution.setup()` on JAX; `distribution` is the Keras object.

    Example (one CPU device makes a 1-device mesh):

    >>> import keras
    >>> from keras.distribution import DataParallel
    >>> distributed = JaxDistributed(DataParallel(devices=["cpu:0"]))
    >>> distributed.engine, distributed.num_replicas
    ('keras.distribution.DataParallel', 1)
    """

    def __init__(self, distribution):
        self.distribution = distribution
        self.engine = f"keras.distribution.{type(distribution).__name__}"
        super().__init__(
            num_replicas=distribution.num_model_replicas,
            num_processes=distribution.num_processes,
            process_id=distribution._process_id,
        )

    @contextlib.contextmanager
    def scope(self):
        with self.distribution.scope():
            yield


def setup(model_parallel, multi_host, job_addresses, num_processes, process_id):
    """The `Distributed` for JAX (see `kzoo.distribution.setup`).

    Example:

    >>> setup(model_parallel=1, multi_host=None, job_addresses=None, num_processes=None,
    ...       process_id=None).engine
    'single device'
    """
    from_environment = any(f"KERAS_DISTRIBUTION_{k}" in os.environ for k in ("NUM_PROCESSES", "JOB_ADDRESSES"))
    if multi_host or job_addresses or num_processes or (multi_host is None and from_environment):
        keras.distribution.initialize(job_addresses, num_processes, process_id)
    devices = [f"{d.platform}:{d.id}" for d in jax.devices()]  # every host's, as Keras names them
    if len(devices) == 1 and model_parallel == 1:
        return Distributed()
    if len(devices) % model_parallel:
        raise ValueError(
            f"model_parallel={model_parallel} does not divide the {len(devices)} devices: each "
            "model replica needs that many. Pick a divisor of the device count."
        )
    if model_parallel == 1:
        return JaxDistributed(keras.distribution.DataParallel(devices=devices))
    mesh = keras.distribution.DeviceMesh(
        (len(devices) // model_parallel, model_parallel), (BATCH_AXIS, MODEL_AXIS), devices=devices
    )
    return JaxDistributed(keras.distribution.ModelParallel(layout_map=layout_map(mesh), batch_dim_name=BATCH_AXIS))
