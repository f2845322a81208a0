"""Breaks kzoo on purpose, five ways, and checks that the tests catch each
break on every backend: a suite that got faster must still fail when the
library is wrong.

Usage: python tests/breakages.py [--backends tensorflow,jax,torch] [--only NAME ...]

Each breakage edits one line of the library in place (the file is restored
afterwards, also on Ctrl-C), runs the test files that guard that code under
each backend with every test selected (no division of the backends' work,
no time budget), and expects at least one failure. Prints one line per
breakage and backend; exits 1 if a breakage passed every test somewhere, or
if a breakage no longer finds the line it edits (the code moved: update the
table below).
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = ("tensorflow", "jax", "torch")

# name -> (file, line as it is, line broken, test files that must catch it)
BREAKAGES = {
    "packer truncation off by one": (
        "kzoo/models/bert/bert_preprocessor.py",
        "budget = sequence_length - 1 - len(segments)",
        "budget = sequence_length - len(segments)",
        ["tests/models/bert/test_bert_preprocessor.py"],
    ),
    "attention mask inverted": (
        "kzoo/layers/multi_head_attention.py",
        'mask = ops.cast(attention_mask, "bool")',
        'mask = ops.logical_not(ops.cast(attention_mask, "bool"))',
        ["tests/layers/test_multi_head_attention.py"],
    ),
    "accumulation divides by the wrong count": (
        "kzoo/models/accumulation.py",
        "totals = {name: float(np.sum(count[rows])) / steps for name, count in counts.items()}",
        "totals = {name: float(np.sum(count[rows])) / len(rows) for name, count in counts.items()}",
        ["tests/models/bert/test_gradient_accumulation.py", "tests/models/test_token_loss_accumulation.py"],
    ),
    "preset loader skips one weight": (
        "kzoo/checkpoints/__init__.py",
        "for (variable, _, _), value in zip(plan, values):",
        "for (variable, _, _), value in zip(plan[1:], values[1:]):",
        ["tests/checkpoints/test_huggingface.py"],
    ),
    "a refused id let through": (
        "kzoo/backend/__init__.py",
        "if low < 0 or high >= vocabulary_size:",
        "if low < 0 or high > vocabulary_size:",
        ["tests/robustness/test_bad_ids.py"],
    ),
}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated (default: all three)")
    parser.add_argument("--only", nargs="+", choices=sorted(BREAKAGES), help="breakages to try (default: all)")
    return parser.parse_args()


def broken(name):
    """Applies a breakage; returns a function that undoes it."""
    path, line, replacement, _ = BREAKAGES[name]
    file = ROOT / path
    original = file.read_text()
    if original.count(line) != 1:
        raise LookupError(f"{path} no longer holds `{line}` exactly once: update BREAKAGES in {__file__}.")
    file.write_text(original.replace(line, replacement))
    return lambda: file.write_text(original)


def caught(name, backend):
    """(whether some test failed, seconds) for one breakage under one backend."""
    environment = {k: v for k, v in os.environ.items() if k != "KZOO_BACKEND_INDEPENDENT_ON"}
    environment.update(KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "--cpu-budget=0",
               *BREAKAGES[name][3]]
    start = time.time()
    result = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, check=False)
    if result.returncode not in (0, 1):  # 2-5: interrupted, internal error, usage, nothing collected
        raise RuntimeError(f"pytest exited {result.returncode} for {name!r} on {backend}:\n{result.stdout[-3000:]}")
    return result.returncode == 1, time.time() - start


def main():
    args = parse_args()
    missed = []
    for name in args.only or BREAKAGES:
        restore = broken(name)
        try:
            for backend in args.backends.split(","):
                failed, seconds = caught(name, backend)
                print(f"{'caught' if failed else 'MISSED'}  {name} on {backend} ({seconds:.0f} s)", flush=True)
                if not failed:
                    missed.append((name, backend))
        finally:
            restore()
    print(f"{len(missed)} breakage(s) passed every test" + (f": {missed}" if missed else ""))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
