"""torch's intra-op thread count while kzoo's `fit` and `predict` run on
torch: the count that is fastest for the machine's load now.

Buys the faster of both on 2 cores: quiet, two threads trained bert_small
1.86x faster than one (Intel Xeon, 2026-11-26); beside other work, two ran
kzoo's MiniLM fine-tuning steps through `tf.data` 3.4x slower than one
(AMD EPYC, 2026-11-27); the tuned run kept 87-97% of the better fixed count
in both (README, "Threads").

torch's OpenMP workers spin while they wait for the next op; when one is
descheduled (by kzoo's own `tf.data` threads, or another process on a shared
core) every op waits for it, so no fixed count is right both on a quiet
machine (all cores) and a busy one (one core less). `start` (from
`kzoo.backend.set_torch_threads`) sets one core less; `ThreadChoice` then
times the steps (batch end to batch end, the input pipeline's share
included), tries the other count for 3 steps, keeps the faster by 10%,
leaves a count whose first step is twice as slow at once, and tries again
after waits of 20 s that double up to 5 minutes. The count stays as the user
set it: `OMP_NUM_THREADS` or `MKL_NUM_THREADS` (no tuning), a later
`torch.set_num_threads(n)`, or `torch.use_deterministic_algorithms(True)`
(sums over another count of threads can differ in the last bits).
"""

import functools
import statistics
import time

_state = {"set_by_kzoo": None, "choice": None}


def start(count, most):
    """Sets torch's threads to `count`; `fit`/`predict` move between it and torch's own `most`."""
    set_threads(count)
    _state["choice"] = ThreadChoice(sorted({count, most}), count)


def set_threads(count):
    import torch  # noqa: PLC0415

    torch.set_num_threads(count)
    _state["set_by_kzoo"] = count


def tuning_active():
    """Whether kzoo may move torch's thread count now: it set the count
    itself, nobody changed it since, and the user asked for no determinism."""
    import torch  # noqa: PLC0415

    choice = _state["choice"]
    return (
        choice is not None
        and len(choice.candidates) > 1
        and torch.get_num_threads() == _state["set_by_kzoo"]
        and not torch.are_deterministic_algorithms_enabled()
    )


class ThreadChoice:
    """Which thread count runs the next step, from the measured time of each
    step (module docstring); `record` takes a step's seconds and returns the
    count for the next step.
    """

    def __init__(self, candidates, current, window=3, first_wait=20.0, longest_wait=320.0, margin=0.1,
                 clock=time.monotonic):
        self.candidates, self.current, self.baseline = list(candidates), current, current
        self.window, self.margin, self.clock = window, margin, clock
        self.first_wait, self.longest_wait = first_wait, longest_wait
        self.wait = first_wait
        self.next_try = clock()  # the first try after `window` steps
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
        if len(timed) == 1 and seconds > 2 * statistics.median_high(self.times[self.baseline]):
            timed[0] = float("inf")  # much slower at once: not worth more steps
            return self._try_next()
        return self._try_next() if len(timed) == self.window else self.current

    def _try_next(self):
        if self.untried:
            self.current, self.trying = self.untried.pop(0), True
            self.times[self.current] = []
            return self.current
        medians = {count: statistics.median_high(times) for count, times in self.times.items()}
        best = min(medians, key=medians.get)
        if medians[best] > (1 - self.margin) * medians[self.baseline]:
            best = self.baseline  # not clearly faster: stay
        self.wait = min(2 * self.wait, self.longest_wait) if best == self.baseline else self.first_wait
        self.next_try = self.clock() + self.wait
        self.current = self.baseline = best
        self.times, self.trying = {best: self.times[best]}, False
        return best


def tuning_callback():
    """A Keras callback that times each step and sets torch's thread count
    from `ThreadChoice`; `None` when the count stays as set (`tuning_active`)."""
    return _callback_class()(_state["choice"]) if tuning_active() else None


@functools.cache
def _callback_class():
    import keras  # noqa: PLC0415

    class ThreadTuning(keras.callbacks.Callback):
        """Times `fit`'s and `predict`'s steps; a standalone `evaluate` keeps the count."""

        def __init__(self, choice):
            super().__init__()
            self.choice, self.last = choice, None

        def _restart(self, logs=None):
            self.choice.restart()
            set_threads(self.choice.current)
            self.last = None

        def _step(self, batch, logs=None):
            now = time.perf_counter()
            if self.last is not None:
                count = self.choice.record(now - self.last)
                if count != _state["set_by_kzoo"]:
                    set_threads(count)
            self.last = now

        def on_epoch_begin(self, epoch, logs=None):
            self.last = None  # not across the validation pass

        on_train_begin = on_train_end = on_predict_begin = on_predict_end = _restart
        on_train_batch_end = on_predict_batch_end = _step

    return ThreadTuning
