"""PyTorch: DistributedDataParallel under `torchrun`.

`torchrun --nproc_per_node=N script.py` starts one process per GPU (and
`--nnodes`, `--node_rank`, `--rdzv_endpoint` join several hosts); `setup`
joins its process group (NCCL on GPUs, gloo on CPUs). Keras 3.15's torch
trainer has no distribution support: its `fit` would train each rank on its
own, unsynchronised. `TorchDistributed.fit` is therefore a small loop around
torch's `DistributedDataParallel`: the forward pass goes through the DDP
wrapper, so the backward pass averages the gradients over the ranks, and the
model's own `compute_loss` and Keras optimizer (e.g. `kzoo.BertAdamW` with its
schedule) do the rest, as in Keras' `train_step`. Each rank reads its slice
of every global batch (`shard_batches`).

FSDP is not offered: it replaces a module's parameters by flattened or
sharded ones behind Keras' back, so Keras' variables would no longer be the
trained tensors. Shard a model too big for one device with
`kzoo.distribution.setup(model_parallel=...)` on JAX.
"""

import os

import keras
import numpy as np
import tensorflow as tf
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from kzoo.distribution.distributed import Distributed


def shard_batches(dataset, num_shards, index):
    """Shard `index`'s slice of each global batch of `dataset`.

    Batch `k` of the result holds examples `[index * b, (index + 1) * b)` of
    global batch `k`, with `b = global batch / num_shards`: the shards of
    a step together are exactly that step's global batch.

    Args:
        dataset: a `tf.data.Dataset` batched with the global batch size and
            `drop_remainder=True` (so every rank gets as many equal batches).
        num_shards: the number of ranks.
        index: this rank, in `[0, num_shards)`.

    Example:

    >>> import tensorflow as tf
    >>> batches = tf.data.Dataset.range(8).batch(4, drop_remainder=True)
    >>> [b.tolist() for b in shard_batches(batches, 2, 1).as_numpy_iterator()]
    [[2, 3], [6, 7]]
    """
    batch_size = tf.nest.flatten(dataset.element_spec)[0].shape[0]
    if batch_size is None or batch_size % num_shards:
        raise ValueError(
            f"Each global batch must split evenly over the {num_shards} ranks; the dataset's "
            f"batch size is {batch_size if batch_size is not None else 'unknown'}. Batch it with "
            f"dataset.batch(global_batch_size, drop_remainder=True), global_batch_size a "
            f"multiple of {num_shards}."
        )
    return dataset.rebatch(batch_size // num_shards).shard(num_shards, index)


class TorchDistributed(Distributed):
    """torch `DistributedDataParallel` over the ranks of the default process group.

    One replica per process (`num_replicas == num_processes`). Build and
    compile the model as usual (`scope()` changes nothing); `fit` trains it
    with DDP. Built by `kzoo.distribution.setup()` under `torchrun`.

    Example (a process group of one, as a single `torchrun` process has):

    >>> import os, tempfile, torch.distributed as dist
    >>> store = dist.FileStore(tempfile.mkstemp()[1], 1)
    >>> dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    >>> distributed = TorchDistributed()
    >>> distributed.num_replicas, distributed.process_id
    (1, 0)
    >>> dist.destroy_process_group()
    """

    engine = "torch.nn.parallel.DistributedDataParallel"

    def __init__(self):
        super().__init__(dist.get_world_size(), dist.get_world_size(), dist.get_rank())

    def fit(self, model, x=None, epochs=1, steps_per_epoch=None, verbose=1):
        """Trains `model` with DDP on `x`, a `tf.data.Dataset` of `(features,
        labels)` or `(features, labels, sample_weight)` batched with the global
        batch size (`drop_remainder=True`); every rank passes the same dataset.
        Returns a `keras.callbacks.History` whose `history["loss"]` holds each
        epoch's mean loss over all ranks. Needs the torch backend and a process
        group (see `kzoo.distribution.setup`); the tests run it on 2 processes."""
        if not isinstance(x, tf.data.Dataset):
            raise ValueError(
                "On torch, distributed fit takes a tf.data.Dataset of (features, labels) batched "
                "with the global batch size, so that each rank can read its slice; got "
                f"{type(x).__name__}. Wrap arrays with tf.data.Dataset.from_tensor_slices((x, y))"
                ".batch(global_batch_size, drop_remainder=True)."
            )
        if not model.compiled:
            model.compile()
        trainable = {id(v.value) for v in model.trainable_weights}
        unused = any(p.requires_grad and id(p) not in trainable for p in model.parameters())
        replicated = DistributedDataParallel(model, find_unused_parameters=unused)
        data = shard_batches(x, self.num_replicas, self.process_id)
        batches = iter(data.repeat()) if steps_per_epoch else None
        history = keras.callbacks.History()
        history.history = {"loss": []}
        for epoch in range(epochs):
            epoch_batches = data if batches is None else (next(batches) for _ in range(steps_per_epoch))
            losses = [_train_step(replicated, model, batch) for batch in epoch_batches]
            loss = torch.stack(losses).mean()
            dist.all_reduce(loss)  # for the log only: the mean over ranks
            history.history["loss"].append(float(loss) / self.num_replicas)
            if verbose and self.is_chief:
                print(f"epoch {epoch + 1}/{epochs}: loss {history.history['loss'][-1]:.4f}", flush=True)
        return history


def _train_step(replicated, model, batch):
    """Keras' torch `train_step` with the forward pass through DDP."""
    batch = keras.tree.map_structure(lambda t: keras.ops.convert_to_tensor(np.asarray(t)), batch)
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(batch)
    y_pred = replicated(x, training=True)
    model.zero_grad()
    loss = model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True)
    model.optimizer.scale_loss(loss).backward()  # DDP averages the gradients over the ranks
    weights = model.trainable_weights
    with torch.no_grad():
        model.optimizer.apply([v.value.grad for v in weights], weights)
    return loss.detach()


def setup():
    """Joins `torchrun`'s process group; the `Distributed` for torch (see
    `kzoo.distribution.setup`). One process: plain Keras.

    Example (not under torchrun):

    >>> setup().engine
    'single device'
    """
    if int(os.environ.get("WORLD_SIZE", "1")) == 1:
        return Distributed()
    if not dist.is_initialized():
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))  # Keras' "cuda" is then this rank's GPU
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return TorchDistributed()
