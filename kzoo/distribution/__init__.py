"""Distributed training on existing engines, one call away.

BERT was pre-trained on Cloud TPU pods, 16 TPU chips for BASE and 64 for
LARGE, with batches of 256 sequences (A.2); the Transformer trained on one
machine with 8 P100 GPUs, each batch holding about 25,000 source and 25,000
target tokens (sec. 5.2). kzoo implements no distributed engine of its own:
`setup()` picks the one that fits the current Keras backend and hardware and
returns a `Distributed` with what a training script needs.

| backend      | hardware                                   | engine                                           |
|--------------|--------------------------------------------|--------------------------------------------------|
| `jax`        | several devices (GPUs, TPU cores)          | `keras.distribution.DataParallel`                |
| `jax`        | same, `model_parallel=k`                   | `keras.distribution.ModelParallel`, a            |
|              |                                            | `(batch, model)` mesh, `jax.layout_map`          |
| `jax`        | several hosts (`multi_host=True`)          | the same after `keras.distribution.initialize`   |
| `tensorflow` | a TPU (VM or pod)                          | `tf.distribute.TPUStrategy`                      |
| `tensorflow` | several GPUs (or logical CPU devices)      | `tf.distribute.MirroredStrategy`                 |
| `tensorflow` | several hosts (`TF_CONFIG`)                | `tf.distribute.MultiWorkerMirroredStrategy`      |
| `torch`      | several processes (`torchrun`)             | `torch.nn.parallel.DistributedDataParallel`      |
| any          | one device, one process                    | none: plain Keras                                |

One convention for batches and learning rates on every engine:

- Datasets are batched with the **global** batch size, the batch the paper
  gives (256 sequences for BERT): each step trains on one global batch,
  split evenly over the replicas (`global_batch_size(per_replica)` and
  `per_replica_batch_size(global)` convert). Keras splits a `tf.data.Dataset`
  across processes and devices on JAX and TensorFlow; on torch each rank
  keeps its slice of every global batch (`kzoo.distribution.torch.shard_batches`).
  A step is then the same computation as a single-device step on the same
  global batch: the gradient of the mean loss over the global batch (each
  replica's mean loss, averaged over replicas; see `kzoo.BertPretrainer` for
  the masked-LM normalisation).
- Learning rates belong to a global batch size. Keep the paper's batch and
  its rate, or change both with `scale_learning_rate` (the linear scaling rule).

Typical use (the same script on every backend; the documentation's
distributed-training guide has the launch commands):

    distributed = kzoo.distribution.setup()          # or setup(model_parallel=4) on JAX
    with distributed.scope():
        model = kzoo.BertPretrainer(kzoo.BertBackbone.from_preset("bert_base_en_uncased"))
        model.compile(optimizer=kzoo.bert_pretraining_optimizer(total_steps=1_000_000))
    dataset = kzoo.data.pretraining_dataset(..., batch_size=256, drop_remainder=True)
    distributed.fit(model, dataset.repeat(), epochs=1, steps_per_epoch=1000)
"""

import importlib

import keras

from kzoo.distribution.distributed import BATCH_AXIS, MODEL_AXIS, Distributed  # noqa: F401 (public names)


def setup(model_parallel=1, *, multi_host=None, job_addresses=None, num_processes=None, process_id=None):
    """Sets up the distributed engine for this backend and hardware.

    See the module docstring for the table of engines.

    Args:
        model_parallel: devices each model replica is sharded over (JAX only):
            attention heads, feed-forward units and embedding columns are split
            along the mesh's `"model"` axis, examples along `"batch"`
            (`kzoo.distribution.jax.layout_map`). 1: data parallelism.
        multi_host: several hosts train together; None: when the
            environment says so (JAX: `KERAS_DISTRIBUTION_NUM_PROCESSES` or
            `KERAS_DISTRIBUTION_JOB_ADDRESSES` is set; TensorFlow: `TF_CONFIG`
            is set). JAX: calls `keras.distribution.initialize` (TPU pods and
            SLURM find each other; elsewhere pass the three arguments below or
            set `KERAS_DISTRIBUTION_JOB_ADDRESSES`, `..._NUM_PROCESSES`,
            `..._PROCESS_ID`). TensorFlow: `MultiWorkerMirroredStrategy` from
            `TF_CONFIG`. torch: not needed, `torchrun` sets the ranks.
        job_addresses: JAX: `"host:port"` of process 0 (the coordinator).
        num_processes: JAX: processes (hosts) in all.
        process_id: JAX: this process's index, 0 on the coordinator.

    Returns:
        A `kzoo.distribution.Distributed`.

    Example (one CPU device: nothing to distribute):

    >>> import kzoo
    >>> kzoo.distribution.setup()
    <Distributed engine='single device' num_replicas=1 num_processes=1 process_id=0>
    """
    if model_parallel < 1:
        raise ValueError(f"model_parallel={model_parallel} must be 1 (data parallelism) or more.")
    backend = keras.backend.backend()
    if backend not in ("jax", "tensorflow", "torch"):
        raise ValueError(f"kzoo.distribution runs on jax, tensorflow or torch; KERAS_BACKEND is {backend!r}.")
    if model_parallel > 1 and backend != "jax":
        raise ValueError(
            f"model_parallel={model_parallel} shards weights with keras.distribution.ModelParallel, "
            f"which runs on JAX only. Run with KERAS_BACKEND=jax, or use data parallelism "
            f"(model_parallel=1) on {backend}."
        )
    if backend != "jax" and (job_addresses or num_processes or process_id is not None):
        raise ValueError(
            "job_addresses, num_processes and process_id configure JAX's coordinator. On "
            f"{backend}, {'set TF_CONFIG on each host' if backend == 'tensorflow' else 'launch with torchrun'}"
            " and call setup()."
        )
    engine = importlib.import_module(f"kzoo.distribution.{backend}")
    if backend == "jax":
        return engine.setup(model_parallel, multi_host, job_addresses, num_processes, process_id)
    return engine.setup(multi_host) if backend == "tensorflow" else engine.setup()


def replica_loss(loss):
    """This replica's share of a mean loss for the engine's gradient sum.

    Under a `tf.distribute` strategy Keras sums the replicas' gradients, so a
    loss that is a mean over the replica's examples is divided by the number
    of replicas (what Keras' own losses do). JAX computes the global batch as
    one program and torch's DistributedDataParallel averages gradients: the
    loss is returned unchanged there. Models that compute their own loss in
    `compute_loss` (e.g. `kzoo.BertPretrainer`) call this.

    Example (no strategy: unchanged):

    >>> import kzoo
    >>> float(kzoo.distribution.replica_loss(keras.ops.convert_to_tensor(2.5)))
    2.5
    """
    if keras.backend.backend() != "tensorflow":
        return loss
    from kzoo.distribution import tensorflow  # noqa: PLC0415 (TensorFlow's strategies, only on its backend)

    return tensorflow.replica_loss(loss)


def sum_over_replicas(values):
    """`(values summed over the replicas in sync, number of replicas)`.

    Under a `tf.distribute` strategy each replica holds its share of a
    gradient; this all-reduces them (None entries stay None), e.g. to clip the
    global batch's gradient (`kzoo.BertAdamW`). Elsewhere, and on one replica,
    `(values, 1)`: JAX sees the global batch, and torch's DDP has already
    averaged the gradients when the optimizer runs.

    Example (no strategy):

    >>> import kzoo
    >>> kzoo.distribution.sum_over_replicas([1.0, None])
    ([1.0, None], 1)
    """
    if keras.backend.backend() != "tensorflow":
        return values, 1
    from kzoo.distribution import tensorflow  # noqa: PLC0415 (TensorFlow's strategies, only on its backend)

    return tensorflow.sum_over_replicas(values)


__all__ = ["BATCH_AXIS", "MODEL_AXIS", "Distributed", "replica_loss", "setup", "sum_over_replicas"]
