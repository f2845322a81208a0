"""torch's process set-up: its intra-op threads.

torch runs each op's loops on an OpenMP pool of (by default) one thread per
physical core, whose workers spin while they wait for the next op. kzoo's
input pipeline (`tf.data`, tensorflow-text) runs in the same process on
TensorFlow's own threads, and the cores may be shared with other processes:
when a worker is descheduled, every op waits for it, and the spinning workers
take the CPU the others need. On 2 cores, 2 threads made BERT's training steps
about 5x slower than 1 (README, "Threads and log lines"). `limit_threads`
leaves one core to the input pipeline.
"""

import os

# Thread counts the user chose for OpenMP / MKL, which torch reads itself.
USER_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def available_cpus():
    """The CPUs this process may run on (its affinity mask, as `taskset` or a
    container sets it), else all of them.

    Example:

    >>> available_cpus() >= 1
    True
    """
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_threads(current, cpus):
    """kzoo's intra-op thread count: one core left to the input pipeline,
    never more than torch's own choice `current`, at least one.

    Example:

    >>> default_threads(current=2, cpus=2), default_threads(current=8, cpus=16), default_threads(1, 1)
    (1, 8, 1)
    """
    return max(1, min(current, cpus - 1))


def limit_threads():
    """Sets torch's intra-op threads to `default_threads` unless the user set
    `OMP_NUM_THREADS` or `MKL_NUM_THREADS` (then torch's own choice stands).
    A later `torch.set_num_threads(n)` wins. Returns the thread count.

    Example:

    >>> import torch
    >>> limit_threads() == torch.get_num_threads()
    True
    """
    import torch  # noqa: PLC0415

    if not any(os.environ.get(name) for name in USER_VARIABLES):
        torch.set_num_threads(default_threads(torch.get_num_threads(), available_cpus()))
    return torch.get_num_threads()
