"""The engine-independent part of kzoo.distribution: the `Distributed` handle
that `setup()` returns, and the mesh axis names. The engine modules
(`jax`, `tensorflow`, `torch`) subclass it; the package's `setup()` picks one."""

import contextlib

MODEL_AXIS = "model"
BATCH_AXIS = "batch"


class Distributed:
    """What a training script needs from a distributed engine.

    Returned by `kzoo.distribution.setup()`; this base class is the
    single-device case (plain Keras), and `kzoo.distribution.jax`,
    `.tensorflow` and `.torch` subclass it for their engines.

    Attributes:
        engine: a short description of the engine (`"single device"`,
            `"keras.distribution.DataParallel"`, ...).
        num_replicas: data-parallel replicas: how many slices each global batch
            is split into.
        num_processes: processes training together (hosts, or torch ranks).
        process_id: this process's index in `[0, num_processes)`; process 0
            writes checkpoints and logs.

    Example:

    >>> import kzoo
    >>> distributed = kzoo.distribution.setup()   # one CPU device here
    >>> distributed.engine, distributed.num_replicas
    ('single device', 1)
    >>> distributed.global_batch_size(32)
    32
    >>> distributed.scale_learning_rate(1e-4, batch_size=512, reference_batch_size=256)
    0.0002
    """

    engine = "single device"

    def __init__(self, num_replicas=1, num_processes=1, process_id=0):
        self.num_replicas = num_replicas
        self.num_processes = num_processes
        self.process_id = process_id

    def __repr__(self):
        return (
            f"<{type(self).__name__} engine={self.engine!r} num_replicas={self.num_replicas} "
            f"num_processes={self.num_processes} process_id={self.process_id}>"
        )

    @property
    def is_chief(self):
        """True on the process that should save checkpoints and print logs (process 0)."""
        return self.process_id == 0

    def scope(self):
        """Context manager to build and compile models under (variables are
        created where the engine wants them: replicated, mirrored or sharded)."""
        return contextlib.nullcontext()

    def global_batch_size(self, per_replica_batch_size):
        """The global batch for `per_replica_batch_size` examples on each replica."""
        return per_replica_batch_size * self.num_replicas

    def per_replica_batch_size(self, global_batch_size):
        """Each replica's share of `global_batch_size` (which must split evenly).

        Example:

        >>> import kzoo
        >>> kzoo.distribution.Distributed(num_replicas=8).per_replica_batch_size(256)
        32
        """
        if global_batch_size % self.num_replicas:
            raise ValueError(
                f"A global batch of {global_batch_size} does not split evenly over "
                f"{self.num_replicas} replicas. Use a multiple of {self.num_replicas}, e.g. "
                f"{self.global_batch_size(max(1, global_batch_size // self.num_replicas))}."
            )
        return global_batch_size // self.num_replicas

    @staticmethod
    def scale_learning_rate(learning_rate, batch_size, reference_batch_size):
        """`learning_rate` for a global `batch_size`, given the rate tuned for
        `reference_batch_size`: the linear scaling rule (Goyal et al., 2017),
        `learning_rate * batch_size / reference_batch_size`. BERT's 1e-4 goes
        with batches of 256 (A.2); keep the warm-up (A.2: 10,000 steps; the
        Transformer's 4,000, sec. 5.3) when scaling up."""
        return learning_rate * batch_size / reference_batch_size

    def fit(self, model, x=None, **kwargs):
        """Trains `model` (built under `scope()`) on `x`, batched with the
        global batch size; `kwargs` are `keras.Model.fit`'s. Returns the
        `keras.callbacks.History`."""
        with self.scope():
            return model.fit(x, **kwargs)
