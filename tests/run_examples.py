"""Runs every example script's smoke mode (`--smoke`) on every Keras backend: the user's path in CI.

Usage: python tests/run_examples.py [--backends tensorflow,jax,torch] [--scripts NAME ...] [--show-output]
                                   [--allow-noise]

Each `examples/<script>.py --smoke` runs every code path of the script's full
run with tiny sizes (see examples/example_runs.py) in its own process, with
`KERAS_BACKEND` set and nothing else changed (no log-level or thread
variables: what a user gets), one after the other, backend by backend
(bert_finetuning.py fine-tunes the built-in all_minilm_l6_v2 preset, which
needs the `minilm` extra). The runs write into a fresh temporary directory (`TMPDIR`),
removed at the end. offline_corpora.py touches no Keras backend and runs once.

Prints one line per run with its wall and CPU time and, when its output holds lines a user
would find noisy (TensorFlow C++ log lines, Python warnings, stray blank
lines), how many and the first few; a failed run's whole output follows its
line. Exits 1 if any run fails or prints noise (`--allow-noise`: noise is only
reported), after running all of them.
"""

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = ("tensorflow", "jax", "torch")
# In the order the README presents them.
SCRIPTS = ("bert_backbone_demo.py", "bert_pretraining.py", "bert_finetuning.py", "serve.py", "transformer_translation.py")
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
    return parser.parse_args()


def run(script, backend, tmpdir, show_output):
    """(exit code, seconds, CPU seconds, output) of `examples/<script> --smoke`; backend None:
    KERAS_BACKEND unset. CPU seconds (user + system) tell more than wall time on a shared machine."""
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env.update(TMPDIR=tmpdir, PYTHONUNBUFFERED="1", **({"KERAS_BACKEND": backend} if backend else {}))
    command = [sys.executable, str(ROOT / "examples" / script), "--smoke"]
    start, cpu_start = time.perf_counter(), _children_cpu_seconds()
    try:
        # Bytes, decoded here: text mode would turn a progress bar's "\r" redraws into lines.
        result = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                timeout=TIMEOUT_SECONDS)
        code, output = result.returncode, result.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as error:
        code, output = 124, (error.output or b"").decode("utf-8", "replace") + f"\n(killed after {TIMEOUT_SECONDS} s)"
    seconds, cpu_seconds = time.perf_counter() - start, _children_cpu_seconds() - cpu_start
    if show_output:
        print(output, end="", flush=True)
    return code, seconds, cpu_seconds, output


def _children_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def noisy_lines(output):
    """Lines a user would find noisy: TensorFlow C++ logs, Python warnings, blank lines
    (a progress bar's carriage-return redraws count as the line they end on)."""
    lines = [line.rstrip("\r").split("\r")[-1] for line in output.removesuffix("\n").split("\n")]
    return [line for i, line in enumerate(lines) if NOISE.search(line) and not _intended_blank(lines, i)]


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
    plan = [(s, None) for s in BACKEND_INDEPENDENT if s in args.scripts]
    plan += [(s, b) for b in backends for s in SCRIPTS if s in args.scripts]
    failures, noisy, start, cpu_start = [], [], time.perf_counter(), _children_cpu_seconds()
    with tempfile.TemporaryDirectory(prefix="kzoo-examples-") as tmpdir:
        for script, backend in plan:
            name = f"{'KERAS_BACKEND=' + backend if backend else 'any backend'} examples/{script} --smoke"
            print(f"===== {name}", flush=True)
            code, seconds, cpu_seconds, output = run(script, backend, tmpdir, args.show_output)
            noise = noisy_lines(output)
            print(f"===== {name}: {'ok' if code == 0 else f'FAILED (exit code {code})'} in {seconds:.0f} s "
                  f"({cpu_seconds:.0f} s CPU)"
                  + (f"; {len(noise)} noisy line(s):" if noise else ""), flush=True)
            for line in noise[:5]:
                print(f"    {line[:200]}")
            if code != 0 and not args.show_output:
                print(output, flush=True)
            if code != 0:
                failures.append(name)
            if noise:
                noisy.append(name)
    failed = failures + ([] if args.allow_noise else [n for n in noisy if n not in failures])
    print(f"examples: {len(plan) - len(failures)} of {len(plan)} smoke runs passed, {len(noisy)} printed noise, "
          f"in {time.perf_counter() - start:.0f} s ({_children_cpu_seconds() - cpu_start:.0f} s CPU)"
          + (f"; failed: {', '.join(failed)}" if failed else ""),
          flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
