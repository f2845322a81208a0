"""TensorFlow: `tf.distribute` strategies.

`choose_strategy` picks, in this order:

- `TPUStrategy` when a Cloud TPU is attached (`TPU_NAME` is set, or the
  machine is a TPU VM: `/dev/accel0`); the resolver finds every host of a pod;
- `MultiWorkerMirroredStrategy` for `multi_host=True` (or None with
  `TF_CONFIG` set), each host told the cluster and its own index by `TF_CONFIG`;
- `MirroredStrategy` over the GPUs when there are several, else over the
  logical CPU devices when there are several (how the tests simulate GPUs);
- no strategy on a single device.

Keras' TensorFlow trainer runs one copy of the step per replica on that
replica's slice of the global batch and sums the replicas' gradients;
its losses divide each replica's mean by the number of replicas, and so does
`replica_loss` for kzoo's own losses.
"""

import os

import tensorflow as tf

from kzoo.distribution.distributed import Distributed


def has_tpu():
    """True on a Cloud TPU VM or with a TPU named by `TPU_NAME`.

    Example:

    >>> has_tpu()   # this machine
    False
    """
    return bool(os.environ.get("TPU_NAME")) or os.path.exists("/dev/accel0")


def choose_strategy(multi_host=None):
    """The `tf.distribute.Strategy` for this hardware, or None on a single
    device (see the module docstring).

    Example (one CPU device):

    >>> choose_strategy() is None
    True
    """
    if has_tpu():
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=os.environ.get("TPU_NAME", "local"))
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    if multi_host or (multi_host is None and "TF_CONFIG" in os.environ):
        if "TF_CONFIG" not in os.environ:
            raise ValueError(
                "multi_host=True on TensorFlow needs TF_CONFIG on every host, e.g. "
                '\'{"cluster": {"worker": ["host0:12345", "host1:12345"]}, "task": {"type": "worker", '
                '"index": 0}}\' (index 1 on the second host); see the distributed-training guide '
                "(docs/guides/distributed.md)."
            )
        return tf.distribute.MultiWorkerMirroredStrategy()
    for device_type in ("GPU", "CPU"):
        devices = [d.name for d in tf.config.list_logical_devices(device_type)]
        if len(devices) > 1:
            return tf.distribute.MirroredStrategy(devices)
    return None


class TensorFlowDistributed(Distributed):
    """A `tf.distribute.Strategy`.

    `scope()` is the strategy's scope: models built and compiled in it have
    mirrored variables, and Keras' `fit` splits each global batch of a
    `tf.data.Dataset` over the replicas (and over the workers, by the
    dataset's auto-shard policy). `strategy` is the TensorFlow object.

    Example (the default strategy stands in for one device):

    >>> import tensorflow as tf
    >>> distributed = TensorFlowDistributed(tf.distribute.get_strategy())
    >>> distributed.num_replicas, distributed.num_processes
    (1, 1)
    """

    def __init__(self, strategy):
        self.strategy = strategy
        self.engine = f"tf.distribute.{type(strategy).__name__}"
        resolver = getattr(strategy, "cluster_resolver", None)
        workers = resolver.cluster_spec().as_dict().get("worker", []) if resolver is not None else []
        multi_worker = isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
        super().__init__(
            num_replicas=strategy.num_replicas_in_sync,
            num_processes=max(1, len(workers)) if multi_worker else 1,
            process_id=(resolver.task_id or 0) if multi_worker else 0,
        )

    def scope(self):
        return self.strategy.scope()


def setup(multi_host):
    """The `Distributed` for TensorFlow (see `kzoo.distribution.setup`).

    Example:

    >>> setup(multi_host=None).engine
    'single device'
    """
    strategy = choose_strategy(multi_host)
    return Distributed() if strategy is None else TensorFlowDistributed(strategy)


def replica_loss(loss):
    """`loss` divided by the replicas in sync under a strategy: Keras
    sums the replicas' gradients, so the sum of the replicas' shares is the
    mean over the global batch.

    Example:

    >>> float(replica_loss(tf.constant(3.0)))   # no strategy: unchanged
    3.0
    """
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    return loss if replicas == 1 else loss / tf.cast(replicas, loss.dtype)


def sum_over_replicas(values):
    """`(values summed over the replicas, number of replicas)` in a strategy's
    replica context; None entries stay None (for clipping the global
    batch's gradient, as BERT's optimizer does).

    Example (no strategy):

    >>> sum_over_replicas([tf.constant(2.0)])[1]
    1
    """
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return values, 1
    present = [i for i, v in enumerate(values) if v is not None]
    summed = context.all_reduce(tf.distribute.ReduceOp.SUM, [values[i] for i in present])
    values = list(values)
    for i, v in zip(present, summed):
        values[i] = v
    return values, context.num_replicas_in_sync
