"""Runs the whole test suite once per Keras backend (tensorflow, jax, torch).

Usage: python tests/run_all_backends.py [--one-at-a-time] [--examples] [pytest arguments...]
       python tests/run_all_backends.py --help

Each backend runs in its own pytest process (Keras reads KERAS_BACKEND at
import). The three processes run side by side: much of a test's time is
single-threaded Python (tracing, tf.data set-up, Keras bookkeeping), so on a
2-core machine three processes finish about 1.5x sooner than one after the
other. Each backend's output goes to `.pytest_cache/backend_reports/<backend>.log`
and is printed whole when that backend ends. `--one-at-a-time` runs them in
turn, streaming the output.

`--examples` also runs every example's smoke mode on every backend
(`tests/run_examples.py`, what CI runs) as a fourth job beside them, one smoke
run at a time: it fills the cores the pytest processes leave idle (the
shortest backend ends minutes before the longest), instead of adding its
minutes before the suite starts. Its output goes to `examples.log` there.

The run fails if any backend fails or collects no test (pytest exit code 5),
or the examples fail, and ends with one line totalling all backends, with the
wall time and the CPU time (user + system) of each job: on a shared machine
the CPU time tells what the run costs, the wall time what the other jobs let
it have.
"""

import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

BACKENDS = ("tensorflow", "jax", "torch")
ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / ".pytest_cache" / "backend_reports"


def start_backend(backend, pytest_args, log=None):
    """Starts pytest for one backend; its output goes to `log` (a file) or the terminal."""
    # The data tests, which no Keras backend touches, and the `once` tests run
    # once, with torch, the backend whose model tests take least time (those exporting a
    # SavedModel with tensorflow, see tests/conftest.py).
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2", KZOO_BACKEND_INDEPENDENT_ON="torch")
    report = REPORTS / f"{backend}.xml"
    report.unlink(missing_ok=True)
    command = [sys.executable, "-m", "pytest", f"--junitxml={report}", "--durations=25", *pytest_args]
    print(f"===== KERAS_BACKEND={backend}: {' '.join(command[1:])}", flush=True)
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT if log else None)


def counts(backend):
    """(passed, failed, skipped) from a backend's junit XML report, zeros if none."""
    report = REPORTS / f"{backend}.xml"
    if not report.exists():
        return 0, 0, 0
    suite = ET.parse(report).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    total, skipped = int(suite.get("tests")), int(suite.get("skipped"))
    failed = int(suite.get("failures")) + int(suite.get("errors"))
    return total - failed - skipped, failed, skipped


def reap(process, block):
    """(exit code, CPU seconds) of a finished pytest process, None while it runs."""
    pid, status, usage = os.wait4(process.pid, 0 if block else os.WNOHANG)
    if pid == 0:
        return None
    return os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime


def start_examples(log=None):
    """Starts tests/run_examples.py (every example's smoke mode, one run at a time)."""
    command = [sys.executable, str(ROOT / "tests" / "run_examples.py"), "--parallel", "1"]
    print(f"===== examples: {' '.join(command[1:])}", flush=True)
    return subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT if log else None)


def run_one_at_a_time(pytest_args, examples):
    results = {}
    jobs = [("examples", start_examples)] if examples else []
    jobs += [(backend, lambda backend=backend: start_backend(backend, pytest_args)) for backend in BACKENDS]
    for name, start_job in jobs:
        start = time.time()
        results[name] = reap(start_job(), block=True)
        code, cpu = results[name]
        print(f"===== {name}: exit code {code} in {time.time() - start:.0f} s ({cpu:.0f} s CPU)\n", flush=True)
    return results


def run_side_by_side(pytest_args, examples):
    start, logs, running, results = time.time(), {}, {}, {}
    for name in BACKENDS + (("examples",) if examples else ()):
        logs[name] = open(REPORTS / f"{name}.log", "w+")  # noqa: SIM115 (closed below)
        running[name] = (start_examples(logs[name]) if name == "examples"
                         else start_backend(name, pytest_args, logs[name]))
    last_note = time.time()
    while running:
        time.sleep(2)
        for backend, process in list(running.items()):
            result = reap(process, block=False)
            if result is None:
                continue
            results[backend] = result
            del running[backend]
            logs[backend].seek(0)
            title = "tests/run_examples.py" if backend == "examples" else f"KERAS_BACKEND={backend}"
            print(f"\n===== output of {title}\n{logs[backend].read()}", flush=True)
            logs[backend].close()
            code, cpu = result
            print(f"===== {backend}: exit code {code} after {time.time() - start:.0f} s ({cpu:.0f} s CPU)", flush=True)
        if running and time.time() - last_note > 120:
            print(f"... {time.time() - start:.0f} s, still running: {', '.join(running)}", flush=True)
            last_note = time.time()
    return results


def main():
    args = sys.argv[1:]
    if args and args[0] in ("-h", "--help"):
        print(__doc__.strip())
        print("\nPytest's own options: python -m pytest --help")
        return 0
    one_at_a_time, examples = "--one-at-a-time" in args, "--examples" in args
    pytest_args = [arg for arg in args if arg not in ("--one-at-a-time", "--examples")]
    REPORTS.mkdir(parents=True, exist_ok=True)
    start = time.time()
    run = run_one_at_a_time if one_at_a_time else run_side_by_side
    results = run(pytest_args, examples)
    codes = {name: code for name, (code, _) in results.items()}
    cpu = sum(seconds for _, seconds in results.values())
    totals = [sum(values) for values in zip(*(counts(backend) for backend in BACKENDS))]
    print("\n" + ", ".join(f"{b}: exit {c}" for b, c in codes.items()))
    if totals[0] == 0:
        print("no test passed on any backend: failing the run")
    print(f"all-backends: {totals[0]} passed, {totals[1]} failed, {totals[2]} skipped in {time.time() - start:.0f} s ({cpu:.0f} s CPU)")
    return 0 if totals[0] > 0 and not any(codes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
