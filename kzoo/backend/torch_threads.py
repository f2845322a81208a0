"""torch's intra-op threads: kzoo's starting count, and a count that follows
the load of the machine while `fit`, `evaluate` and `predict` run.

torch runs each op's loops on an OpenMP pool of (by default) one thread per
physical core, whose workers spin while they wait for the next op. kzoo's
input pipeline (`tf.data`, tensorflow-text) runs in the same process on
TensorFlow's own threads, and the cores may be shared with other processes:
when a worker is descheduled, every op waits for it. On 2 cores with one kept
busy by another process, 2 threads made BERT's training steps about 5x slower
than 1, while on a quiet machine 2 threads are faster (README, "Threads and
log lines"). No fixed count is right for both, so:

- `limit_threads` (run by `import kzoo`) starts from torch's own count when
  the CPUs the process may use are idle as kzoo is imported (`idle_cpus`,
  a 0.2 s look at /proc/stat on Linux), else from one core less, the count
  that does not collapse (`default_threads`);
- `ThreadChoice` then measures: during a run it times the steps at the
  current count, tries each other candidate count for a few steps, keeps the
  fastest, and tries again after a while (20 s, doubling up to 5 minutes
  while the answer stays), since the load of a machine changes. A tried
  count whose first step is more than twice as slow is left at once, so a
  try costs at most about one slow step.

The count stays as set (no measuring) when the user chose it:
`OMP_NUM_THREADS` or `MKL_NUM_THREADS` in the environment (torch's own count
then stands), `torch.set_num_threads(n)` after `import kzoo` (any n other than
kzoo's), or `torch.use_deterministic_algorithms(True)`: sums split over
another count of threads can differ in the last bits (1.5e-7 after 8 steps
of a small BERT), so a run that must repeat bit for bit keeps one count.
"""

import functools
import os
import time

# Thread counts the user chose for OpenMP / MKL, which torch reads itself.
USER_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
# How much of one CPU others may use while the machine still counts as quiet
# (a shell, an editor: not a process that keeps a core busy).
QUIET_MARGIN = 0.3

_state = {"set_by_kzoo": None, "choice": None}


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


def idle_cpus(seconds=0.2, stat="/proc/stat"):
    """How many of the CPUs this process may run on were idle over the next
    `seconds` (idle and I/O wait time over all time, from the kernel's
    per-CPU counters; time stolen by a hypervisor counts as busy). `None`
    where the counters cannot be read (not Linux).

    Example:

    >>> idle = idle_cpus(0.05)
    >>> idle is None or 0.0 <= idle <= available_cpus()
    True
    """
    try:
        allowed = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        allowed = None

    def counters():
        totals = {}
        with open(stat) as file:
            for line in file:
                name, *fields = line.split()
                if name.startswith("cpu") and name[3:].isdigit() and (allowed is None or int(name[3:]) in allowed):
                    ticks = [int(field) for field in fields[:8]]  # user nice system idle iowait irq softirq steal
                    totals[name] = (ticks[3] + ticks[4], sum(ticks))
        return totals

    try:
        before = counters()
        time.sleep(seconds)
        after = counters()
    except (OSError, ValueError, IndexError):
        return None
    idle = 0.0
    for name, (idle_after, total_after) in after.items():
        idle_before, total_before = before.get(name, (idle_after, total_after))
        if total_after > total_before:
            idle += (idle_after - idle_before) / (total_after - total_before)
    return idle if after else None


def default_threads(current, cpus, idle=None):
    """kzoo's starting intra-op thread count: torch's own choice `current`
    when (nearly) all `cpus` are `idle`, else one core left to the input
    pipeline and the other processes, never more than `current`, at least
    one. `idle=None` (unknown) counts as busy.

    Example:

    >>> default_threads(current=2, cpus=2), default_threads(current=8, cpus=16), default_threads(1, 1)
    (1, 8, 1)
    >>> default_threads(current=2, cpus=2, idle=1.9), default_threads(current=2, cpus=2, idle=1.2)
    (2, 1)
    """
    if idle is not None and idle >= cpus - QUIET_MARGIN:
        return max(1, current)
    return max(1, min(current, cpus - 1))


def candidate_threads(start, most):
    """The counts `ThreadChoice` tries: kzoo's starting count `start`, torch's
    own `most`, and half of `most` on 4 or more cores (where one busy core
    can still stall a pool of `most - 1`).

    Example:

    >>> candidate_threads(1, 2), candidate_threads(8, 8), candidate_threads(15, 16)
    ([1, 2], [4, 8], [8, 15, 16])
    """
    counts = {start, most} | ({most // 2} if most >= 4 else set())
    return sorted(count for count in counts if count >= 1)


def limit_threads():
    """Sets torch's intra-op threads to `default_threads` (with the CPUs idle
    now, `idle_cpus`) unless the user set
    `OMP_NUM_THREADS` or `MKL_NUM_THREADS` (then torch's own choice stands),
    and lets `fit`/`evaluate`/`predict` move from there (`tuning_callback`).
    A later `torch.set_num_threads(n)` wins. Returns the thread count.

    Example:

    >>> import torch
    >>> limit_threads() == torch.get_num_threads()
    True
    """
    import torch  # noqa: PLC0415

    if not any(os.environ.get(name) for name in USER_VARIABLES):
        most, cpus = torch.get_num_threads(), available_cpus()
        start = default_threads(most, cpus, idle_cpus())
        torch.set_num_threads(start)
        _state["set_by_kzoo"] = start
        # The busy machine's count stays a candidate when a quiet one starts higher.
        _state["choice"] = ThreadChoice(candidate_threads(default_threads(most, cpus), most), start)
    return torch.get_num_threads()


def set_threads(count):
    """`torch.set_num_threads(count)`, remembered as kzoo's own choice (a
    count that differs from it was set by someone else: `tuning_active`).

    Example:

    >>> import torch
    >>> before = torch.get_num_threads()
    >>> set_threads(1); torch.get_num_threads()
    1
    >>> set_threads(before)
    """
    import torch  # noqa: PLC0415

    torch.set_num_threads(count)
    _state["set_by_kzoo"] = count


def tuning_active():
    """Whether kzoo may move torch's thread count now: it set the count
    itself, nobody changed it since, and the user asked for no determinism.

    Example:

    >>> import torch
    >>> torch.use_deterministic_algorithms(True)
    >>> tuning_active()
    False
    >>> torch.use_deterministic_algorithms(False)
    """
    import torch  # noqa: PLC0415

    choice = _state["choice"]
    return (
        choice is not None
        and len(choice.candidates) > 1
        and torch.get_num_threads() == _state["set_by_kzoo"]
        and not torch.are_deterministic_algorithms_enabled()
    )


class ThreadChoice:
    """Which thread count to run the next step at, from the measured time of
    each step (see the module docstring). No torch here: `record` takes a
    step's seconds and returns the count for the next step.

    Args:
        candidates: list of int. The counts to choose from.
        current: int. The count in use now.
        window: int. Steps timed per count before choosing. Defaults to `3`.
        first_wait: float. Seconds before the first try. Defaults to `20.0`.
        longest_wait: float. The longest wait between tries. Defaults to `320.0`.
        margin: float. How much faster another count must be to be kept. Defaults to `0.1`.
        clock: callable. Returns seconds. Defaults to `time.monotonic`.

    Example:

    >>> now = [0.0]
    >>> choice = ThreadChoice([1, 2], 1, first_wait=0.0, clock=lambda: now[0])
    >>> counts = [choice.record(1.0) for _ in range(3)]  # 3 steps of 1 s at 1 thread, then a try of 2
    >>> counts[-1]
    2
    >>> [choice.record(0.6) for _ in range(3)][-1]  # 2 threads: 0.6 s a step; kept
    2
    """

    def __init__(self, candidates, current, window=3, first_wait=20.0, longest_wait=320.0, margin=0.1,
                 clock=time.monotonic):
        self.candidates, self.current, self.baseline = list(candidates), current, current
        self.window, self.margin, self.clock = window, margin, clock
        self.first_wait, self.longest_wait = first_wait, longest_wait
        self.wait = first_wait
        self.next_try = clock() + first_wait
        self.restart()

    def restart(self):
        """Forgets the steps timed so far (a run begins or ends): a try under
        way ends, back at the count it started from."""
        self.current = self.baseline
        self.times, self.untried, self.trying = {}, [], False

    def record(self, seconds):
        """Takes the time of a step run at `self.current`; returns the count to use next."""
        timed = self.times.setdefault(self.current, [])
        timed.append(seconds)
        del timed[: -self.window]
        if not self.trying:
            if len(timed) == self.window and self.clock() >= self.next_try:
                self.baseline, self.times = self.current, {self.current: timed}
                self.untried = [count for count in self.candidates if count != self.current]
                return self._try_next()
            return self.current
        if len(timed) == 1 and seconds > 2 * _median(self.times[self.baseline]):
            timed[0] = float("inf")  # much slower at once: not worth more steps
            return self._try_next()
        return self._try_next() if len(timed) == self.window else self.current

    def _try_next(self):
        if self.untried:
            self.current, self.trying = self.untried.pop(0), True
            self.times[self.current] = []
            return self.current
        medians = {count: _median(times) for count, times in self.times.items()}
        best = min(medians, key=medians.get)
        if medians[best] > (1 - self.margin) * medians[self.baseline]:
            best = self.baseline  # not clearly faster: stay
        self.wait = min(2 * self.wait, self.longest_wait) if best == self.baseline else self.first_wait
        self.next_try = self.clock() + self.wait
        self.current = self.baseline = best
        self.times, self.trying = {best: self.times[best]}, False
        return best


def _median(values):
    values = sorted(values)
    return values[len(values) // 2] if values else float("inf")


def tuning_callback():
    """A Keras callback that times each `fit`/`evaluate`/`predict` step and
    sets torch's thread count from kzoo's `ThreadChoice`; `None` when the
    count stays as set (`tuning_active`).

    Example:

    >>> import torch
    >>> callback = tuning_callback()
    >>> callback is None or callback.choice.current == torch.get_num_threads()
    True
    """
    if not tuning_active():
        return None
    return _callback_class()(_state["choice"])


@functools.cache
def _callback_class():
    """The Keras callback class, built at the first call (keras loads after kzoo's process set-up)."""
    import keras  # noqa: PLC0415

    class ThreadTuning(keras.callbacks.Callback):
        """Times steps end to end (batch end to batch end: the input
        pipeline's share included). Inside `fit`, the validation pass
        pauses the timing; on its own, `evaluate` is timed as `predict` is."""

        def __init__(self, choice):
            super().__init__()
            self.choice, self.last, self.in_fit, self.paused = choice, None, False, False

        def _begin(self):
            self.choice.restart()
            set_threads(self.choice.current)
            self.last = None

        def _end(self):
            self.choice.restart()
            set_threads(self.choice.current)

        def _step(self):
            now = time.perf_counter()
            if self.last is not None and not self.paused:
                count = self.choice.record(now - self.last)
                if count != _state["set_by_kzoo"]:
                    set_threads(count)
            self.last = now

        def on_train_begin(self, logs=None):
            self.in_fit = True
            self._begin()

        def on_train_end(self, logs=None):
            self.in_fit = False
            self._end()

        def on_epoch_begin(self, epoch, logs=None):
            self.last = None

        def on_train_batch_end(self, batch, logs=None):
            self._step()

        def on_test_begin(self, logs=None):
            if self.in_fit:
                self.paused = True
            else:
                self._begin()

        def on_test_end(self, logs=None):
            if self.in_fit:
                self.paused, self.last = False, None
            else:
                self._end()

        def on_test_batch_end(self, batch, logs=None):
            self._step()

        def on_predict_begin(self, logs=None):
            self._begin()

        def on_predict_end(self, logs=None):
            self._end()

        def on_predict_batch_end(self, batch, logs=None):
            self._step()

    return ThreadTuning
