"""The linter's rules (`[tool.ruff]` in pyproject.toml) hold everywhere: ruff
runs with the suite, so CI fails on a violation."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.backend_independent  # reads files only: run once (conftest.py)
ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    command = [shutil.which("ruff") or sys.executable, "check", str(ROOT)]
    if command[0] == sys.executable:
        command[1:1] = ["-m", "ruff"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_time_budget_lists_only_tests_that_exist():
    """Every entry of tests/time_budget.py names a test function of its file:
    a renamed or deleted test leaves no stale allowance behind."""
    import re

    from tests.time_budget import LISTED

    stale = []
    for entry in LISTED:
        path, _, name = entry.partition("::")
        file = ROOT / path
        if not file.is_file() or not re.search(rf"^def {re.escape(name.split('[')[0])}\(", file.read_text(), re.M):
            stale.append(entry)
    assert not stale, stale
