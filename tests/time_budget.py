"""The suite's time budget: every test's CPU seconds, the slowest listed at
the end of each run, and a test over the budget fails the run unless it is
listed below with the reason it needs the time.

A test's CPU time is its setup, call and teardown (a module fixture's cost
goes to the first test that asks for it), in this process and in the
processes it started and waited for, all threads together: on a shared
machine that moves far less than wall time. The budget is set for 2 cores
without AVX-512, the slower kind of machine CI gets; a test that needs more
is either worth its time (the reason says why) or is cut to fit.

`--cpu-budget=0` turns the check off (the breakage script does:
tests/breakages.py runs a few files with the library broken on purpose).
"""

import json
import os
import resource
from pathlib import Path

import pytest

BUDGET_CPU_SECONDS = 20.0
SLOWEST_SHOWN = 25
REPORTS = Path(__file__).resolve().parents[1] / ".pytest_cache" / "backend_reports"

# "file::test" (parameters share their test's entry) -> why it needs more than the budget.
LISTED = {
}


def _cpu_seconds():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _entry(item):
    return f"{item.path.relative_to(Path(__file__).resolve().parents[1]).as_posix()}::{item.originalname}"


def pytest_addoption(parser):
    parser.addoption("--cpu-budget", type=float, default=BUDGET_CPU_SECONDS,
                     help=f"CPU seconds a test may take unless tests/time_budget.py lists it "
                          f"(default {BUDGET_CPU_SECONDS:g}; 0 turns the check off)")


_spent = {}
_log = []  # the open report, one line per test as it ends: a run stopped part way still says where time went


def pytest_sessionstart(session):
    REPORTS.mkdir(parents=True, exist_ok=True)
    _log.append(open(REPORTS / f"{os.environ.get('KERAS_BACKEND', 'tensorflow')}.cpu.jsonl", "w"))  # noqa: SIM115


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    start = _cpu_seconds()
    yield
    _spent[item.nodeid] = (_entry(item), _cpu_seconds() - start)
    _log[0].write(json.dumps([item.nodeid, round(_spent[item.nodeid][1], 2)]) + "\n")
    _log[0].flush()


def over_budget(spent, budget):
    """The tests of `spent` ({nodeid: (entry, seconds)}) over `budget` whose entry is not listed."""
    return {node: seconds for node, (entry, seconds) in spent.items() if seconds > budget and entry not in LISTED}


def pytest_sessionfinish(session, exitstatus):
    _log.pop().close()
    budget = session.config.getoption("--cpu-budget")
    if budget and over_budget(_spent, budget) and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _spent:
        return
    total = sum(seconds for _, seconds in _spent.values())
    slowest = sorted(_spent.items(), key=lambda kv: -kv[1][1])[:SLOWEST_SHOWN]
    terminalreporter.section(f"{len(slowest)} slowest tests by CPU seconds ({total:.0f} s CPU in all)")
    for node, (entry, seconds) in slowest:
        terminalreporter.write_line(f"{seconds:7.1f} s  {node}{'' if entry not in LISTED else '  (listed)'}")
    budget = config.getoption("--cpu-budget")
    over = over_budget(_spent, budget) if budget else {}
    if over:
        terminalreporter.section("over the time budget", red=True)
        for node, seconds in sorted(over.items(), key=lambda kv: -kv[1]):
            terminalreporter.write_line(f"{seconds:7.1f} s CPU  {node}", red=True)
        terminalreporter.write_line(
            f"Each test above took more than {budget:g} s of CPU. Make it cheaper (a tiny configuration, a "
            f"fixture shared by the file, one shape per test), or list it in tests/time_budget.py with the "
            f"reason it needs the time.", red=True)
