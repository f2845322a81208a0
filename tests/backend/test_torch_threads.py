"""torch's thread count follows the load (kzoo.backend.torch_threads):
`ThreadChoice` on measured step times, and the callback that
`fit`/`evaluate`/`predict` get on torch, in a fresh process where kzoo sets
the count (the suite fixes one thread: tests/conftest.py)."""

import keras
import pytest

from kzoo.backend.torch_threads import ThreadChoice
from tests.backend.test_setup import run_clean


class Machine:
    """Step times by thread count, and a clock that each step moves on."""

    def __init__(self, seconds_at):
        self.seconds_at, self.now = seconds_at, 0.0

    def run(self, choice, steps):
        counts = []
        for _ in range(steps):
            seconds = self.seconds_at[choice.current]
            self.now += seconds
            counts.append(choice.record(seconds))
        return counts

    def clock(self):
        return self.now


def choice_on(machine, candidates=(1, 2), **kwargs):
    return ThreadChoice(list(candidates), candidates[0], clock=machine.clock, **kwargs)


@pytest.mark.backend_independent
def test_a_quiet_machine_moves_to_the_faster_count_and_stays():
    machine = Machine({1: 1.0, 2: 0.6})
    choice = choice_on(machine)
    counts = machine.run(choice, 200)
    first_two = counts.index(2)  # counts[i]: the count for step i + 1
    assert first_two + 1 == 3  # the first try after the first 3 steps
    assert counts[first_two:first_two + 3] == [2, 2, 2]
    assert set(counts[first_two + 3:]) <= {1, 2}
    # Tries 1 thread again, 3 steps after 20 s, 40 s, ...: over 95% of the steps after the first try at 2.
    assert counts[first_two:].count(2) / len(counts[first_two:]) > 0.95
    assert choice.current == 2 and choice.wait > 20.0


@pytest.mark.backend_independent
def test_a_count_that_collapses_costs_one_step_per_try():
    machine = Machine({1: 1.0, 2: 5.0})  # 2 threads next to a busy core: 5x slower
    choice = choice_on(machine)
    counts = machine.run(choice, 600)
    tries = counts.count(2)
    assert counts[-1] == 1 and choice.current == 1
    # One 5 s step per try: at once, then after waits of 40, 80, 160 and 320 s: 4 tries in 10 minutes.
    assert tries == 4, tries
    slow_seconds = tries * 4.0
    assert slow_seconds / (machine.now) < 0.05  # under 5% of the run lost to trying


@pytest.mark.backend_independent
def test_a_count_not_clearly_faster_is_not_kept():
    machine = Machine({1: 1.0, 2: 0.95})  # within the 10% margin
    choice = choice_on(machine)
    counts = machine.run(choice, 100)
    assert counts[-1] == 1 and 2 in counts


@pytest.mark.backend_independent
def test_the_choice_follows_a_change_of_load():
    machine = Machine({1: 1.0, 2: 0.6})
    choice = choice_on(machine)
    machine.run(choice, 60)
    assert choice.current == 2
    machine.seconds_at = {1: 1.0, 2: 5.0}  # another process starts on one core
    started = machine.now
    counts = machine.run(choice, 30)
    assert counts[-1] == 1
    assert machine.now - started < 100.0  # back to 1 thread within one wait (40 s of slow steps at most)


@pytest.mark.backend_independent
def test_a_run_ending_during_a_try_goes_back_to_the_count_it_tried_from():
    machine = Machine({1: 1.0, 2: 0.6})
    choice = choice_on(machine, first_wait=0.0)
    assert machine.run(choice, 3)[-1] == 2  # trying 2 threads
    choice.restart()
    assert choice.current == 1 and choice.times == {}


FITS = """
    import json, numpy as np, kzoo, keras, torch
    from kzoo.backend import torch_threads
    choice = torch_threads._state["choice"]
    if choice is not None:
        choice.first_wait = choice.wait = choice.next_try = 0.0  # try at once, for the test
    seen = []

    class Watch(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            seen[-1].add(torch.get_num_threads())

        on_predict_batch_begin = on_train_batch_begin

    keras.utils.set_random_seed(0)
    model = kzoo.BertClassifier(kzoo.BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=16,
                                                  intermediate_dim=32, max_sequence_length=16), num_classes=2)
    x = {"token_ids": np.random.randint(5, 50, (128, 16)), "segment_ids": np.zeros((128, 16), "int32"),
         "padding_mask": np.ones((128, 16), "int32")}

    def run(case):
        seen.append(set())
        model.fit(x, np.arange(128) % 2, batch_size=8, epochs=2, validation_split=0.25, verbose=0, callbacks=[Watch()])
        model.predict(x, batch_size=8, verbose=0, callbacks=[Watch()])
        results[case] = {"seen": sorted(seen[-1]), "after": torch.get_num_threads(),
                         "tuned": torch_threads.tuning_active()}

    results = {"candidates": choice.candidates if choice else None}
    run("kzoo's count")
    torch.use_deterministic_algorithms(True)
    run("deterministic")
    torch.use_deterministic_algorithms(False)
    torch.set_num_threads(torch.get_num_threads() + 1)
    run("set_num_threads")
    print(json.dumps(results))
"""


def fits(**environment):
    return run_clean(FITS, **environment)


@pytest.mark.skipif(keras.backend.backend() != "torch", reason="torch's threads")
def test_fit_and_predict_try_every_candidate_unless_the_user_chose_a_count():
    results = fits()
    if len(results["candidates"]) == 1:
        pytest.skip("one CPU: no count to choose")
    tuned = results["kzoo's count"]
    assert tuned["seen"] == results["candidates"]  # every count tried during fit and predict
    assert tuned["after"] in results["candidates"] and tuned["tuned"]
    # torch.use_deterministic_algorithms(True): one count, the one in use.
    assert results["deterministic"]["seen"] == [tuned["after"]] and not results["deterministic"]["tuned"]
    # torch.set_num_threads(n) after import kzoo: n stays.
    chosen = results["set_num_threads"]
    assert len(chosen["seen"]) == 1 and chosen["after"] == chosen["seen"][0] and not chosen["tuned"]


@pytest.mark.skipif(keras.backend.backend() != "torch", reason="torch's threads")
def test_omp_num_threads_keeps_torchs_count():
    results = fits(OMP_NUM_THREADS="2")
    assert results["candidates"] is None
    assert all(results[case]["seen"] == [2] for case in ("kzoo's count", "deterministic"))
    assert not results["kzoo's count"]["tuned"]


@pytest.mark.skipif(keras.backend.backend() != "torch", reason="torch's threads")
def test_the_suite_runs_at_one_fixed_thread():
    import torch  # noqa: PLC0415

    from kzoo.backend import torch_threads  # noqa: PLC0415

    assert torch.get_num_threads() == 1 and not torch_threads.tuning_active()
