"""Runs the whole test suite once per Keras backend (tensorflow, jax, torch).

Usage: python tests/run_all_backends.py [pytest arguments...]

Each backend runs in its own process (Keras reads KERAS_BACKEND at import).
The run fails if any backend fails or collects no test (pytest exit code 5),
and ends with one line totalling all backends.
"""

import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

BACKENDS = ("tensorflow", "jax", "torch")
ROOT = Path(__file__).resolve().parents[1]


def run_backend(backend, pytest_args, report):
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2")
    command = [sys.executable, "-m", "pytest", f"--junitxml={report}", *pytest_args]
    print(f"\n===== KERAS_BACKEND={backend}: {' '.join(command[1:])}", flush=True)
    start = time.time()
    code = subprocess.call(command, cwd=ROOT, env=env)
    print(f"===== {backend}: exit code {code} in {time.time() - start:.0f} s", flush=True)
    return code


def counts(report):
    """(passed, failed, skipped) from a junit XML report."""
    suite = ET.parse(report).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    total, skipped = int(suite.get("tests")), int(suite.get("skipped"))
    failed = int(suite.get("failures")) + int(suite.get("errors"))
    return total - failed - skipped, failed, skipped


def main():
    pytest_args = sys.argv[1:]
    reports_dir = ROOT / ".pytest_cache" / "backend_reports"
    reports_dir.mkdir(parents=True, exist_ok=True)
    exit_codes, totals = {}, [0, 0, 0]
    for backend in BACKENDS:
        report = reports_dir / f"{backend}.xml"
        report.unlink(missing_ok=True)
        exit_codes[backend] = run_backend(backend, pytest_args, report)
        if report.exists():
            totals = [t + c for t, c in zip(totals, counts(report))]
    print("\n" + ", ".join(f"{b}: exit {c}" for b, c in exit_codes.items()))
    if totals[0] == 0:
        print("no test passed on any backend: failing the run")
    print(f"all-backends: {totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    return 0 if totals[0] > 0 and not any(exit_codes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
