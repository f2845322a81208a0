"""Runs every example script's smoke mode (`--smoke`) on every Keras backend: the user's path in CI.

Usage: python tests/run_examples.py [--backends tensorflow,jax,torch] [--scripts NAME ...] [--show-output]
                                   [--allow-noise] [--parallel N]

Each `examples/<script>.py --smoke` runs every code path of the script's full
run with tiny sizes (see examples/example_runs.py) in its own process, with
`KERAS_BACKEND` set, `TF_CPP_MIN_LOG_LEVEL` as the caller has it (the examples
keep TensorFlow's C++ lines off the terminal themselves), no thread variables: what a user gets. A backend's scripts run one after the other, in
the README's order (bert_finetuning.py --smoke fine-tunes what
bert_pretraining.py --smoke saved on the same backend, serve.py serves what
bert_finetuning.py saved); `--parallel` backends run side by side (default 2:
a smoke run is mostly single-threaded tracing and compiling, so two use two
cores). The runs write into a fresh temporary directory (`TMPDIR`), removed at
the end. offline_corpora.py touches no Keras backend and runs once.

Prints one line per run, as it ends, with its wall and CPU time and, when its output holds lines a user
would find noisy (TensorFlow C++ log lines, Python warnings, stray blank
lines), how many and the first few; a failed run's whole output follows its
line. Exits 1 if any run fails or prints noise (`--allow-noise`: noise is only
reported), after running all of them.
"""

import argparse
import concurrent.futures
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = ("tensorflow", "jax", "torch")
# In the order the README presents them.
SCRIPTS = ("bert_backbone_demo.py", "bert_pretraining.py", "bert_finetuning.py", "serve.py", "semantic_search.py",
           "transformer_translation.py")
BACKEND_INDEPENDENT = ("offline_corpora.py",)
TIMEOUT_SECONDS = 600
NOISE = re.compile(
    r"^[IWEF]\d{4} |^WARNING: All log messages|cuInit|oneDNN|Ignoring Assert|:\d+: \w*Warning: |^\s*$"
)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated (default: all three)")
    parser.add_argument("--scripts", nargs="+", default=SCRIPTS + BACKEND_INDEPENDENT,
                        help="example scripts to run (default: all)")
    parser.add_argument("--show-output", action="store_true", help="print every run's output, not only failures'")
    parser.add_argument("--allow-noise", action="store_true",
                        help="report noisy lines without failing (by default a run that prints them fails)")
    parser.add_argument("--parallel", type=int, default=2,
                        help="backends whose runs go side by side (default 2; 1: one run at a time)")
    return parser.parse_args()


def run(script, backend, tmpdir):
    """(exit code, seconds, CPU seconds, output) of `examples/<script> --smoke`; backend None:
    KERAS_BACKEND unset. CPU seconds (user + system, this run's process tree alone) tell more
    than wall time on a shared machine."""
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env.update(TMPDIR=tmpdir, PYTHONUNBUFFERED="1", **({"KERAS_BACKEND": backend} if backend else {}))
    # Smoke runs go beside other runs (or the suite) on the same cores, where torch's
    # spin-waiting threads wait on busy cores: one thread, as the suite's (tests/conftest.py).
    env.setdefault("OMP_NUM_THREADS", "1")
    command = [sys.executable, str(ROOT / "examples" / script), "--smoke"]
    start = time.perf_counter()
    # Bytes, decoded at the end: text mode would turn a progress bar's "\r" redraws into lines.
    with tempfile.TemporaryFile(dir=tmpdir) as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        code, cpu_seconds = _wait(process, start + TIMEOUT_SECONDS)
        log.seek(0)
        output = log.read().decode("utf-8", "replace")
    if code is None:
        code, output = 124, output + f"\n(killed after {TIMEOUT_SECONDS} s)"
    return code, time.perf_counter() - start, cpu_seconds, output


def _wait(process, deadline):
    """(exit code or None if killed at `deadline`, CPU seconds of the process and its children)."""
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
            return process.returncode, usage.ru_utime + usage.ru_stime
        if time.perf_counter() > deadline:
            process.kill()
            _, _, usage = os.wait4(process.pid, 0)
            process.returncode = -9
            return None, usage.ru_utime + usage.ru_stime
        time.sleep(0.2)


def _children_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def noisy_lines(output):
    """Lines a user would find noisy: TensorFlow C++ logs, Python warnings, blank lines
    (a progress bar's carriage-return redraws count as the line they end on)."""
    lines = [line.rstrip("\r").split("\r")[-1] for line in output.removesuffix("\n").split("\n")]
    return [line for i, line in enumerate(lines)
            if NOISE.search(line) and not _intended_blank(lines, i)]


def _intended_blank(lines, i):
    """A blank line that separates two parts of a report (the examples print
    some on purpose, e.g. before a results block), not one left by a tool."""
    return not lines[i].strip() and 0 < i < len(lines) - 1 and lines[i - 1].strip() and lines[i + 1].strip()


def main():
    args = parse_args()
    backends = [b for b in args.backends.split(",") if b]
    unknown = sorted(set(backends) - set(BACKENDS)) + sorted(
        set(args.scripts) - set(SCRIPTS) - set(BACKEND_INDEPENDENT))
    if unknown:
        sys.exit(f"unknown backend(s) or script(s): {unknown}; backends {BACKENDS}, "
                 f"scripts {SCRIPTS + BACKEND_INDEPENDENT}")
    # One chain per backend (its scripts in order: later ones use what earlier ones saved).
    chains = [[(s, None)] for s in BACKEND_INDEPENDENT if s in args.scripts]
    chains += [[(s, b) for s in SCRIPTS if s in args.scripts] for b in backends]
    chains = [chain for chain in chains if chain]
    total = sum(len(chain) for chain in chains)
    failures, noisy, start, cpu_start = [], [], time.perf_counter(), _children_cpu_seconds()
    lock = threading.Lock()

    def run_chain(chain, tmpdir):
        for script, backend in chain:
            name = f"{'KERAS_BACKEND=' + backend if backend else 'any backend'} examples/{script} --smoke"
            with lock:
                print(f"===== {name}: started", flush=True)
            code, seconds, cpu_seconds, output = run(script, backend, tmpdir)
            noise = noisy_lines(output)
            with lock:
                if args.show_output or code != 0:
                    print(output, end="" if output.endswith("\n") else "\n", flush=True)
                print(f"===== {name}: {'ok' if code == 0 else f'FAILED (exit code {code})'} in {seconds:.0f} s "
                      f"({cpu_seconds:.0f} s CPU)"
                      + (f"; {len(noise)} noisy line(s):" if noise else ""), flush=True)
                for line in noise[:5]:
                    print(f"    {line[:200]}", flush=True)
                if code != 0:
                    failures.append(name)
                if noise:
                    noisy.append(name)

    with tempfile.TemporaryDirectory(prefix="kzoo-examples-") as tmpdir:
        with concurrent.futures.ThreadPoolExecutor(max(1, args.parallel)) as pool:
            for finished in [pool.submit(run_chain, chain, tmpdir) for chain in chains]:
                finished.result()
    failed = failures + ([] if args.allow_noise else [n for n in noisy if n not in failures])
    print(f"examples: {total - len(failures)} of {total} smoke runs passed, {len(noisy)} printed noise, "
          f"in {time.perf_counter() - start:.0f} s ({_children_cpu_seconds() - cpu_start:.0f} s CPU)"
          + (f"; failed: {', '.join(failed)}" if failed else ""),
          flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
