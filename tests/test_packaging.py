"""A non-editable install (a built wheel) carries the preset files, every
module, and the `kzoo` command."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kzoo.presets import list_presets


@pytest.mark.backend_independent  # checked under one backend (tests/conftest.py)
def test_wheel_contains_every_preset(tmp_path):
    root = Path(__file__).resolve().parents[1]
    source = tmp_path / "source"  # build from a copy: setuptools writes build/ into the tree
    for folder in ("kzoo", "kzoo_cli", "presets"):
        shutil.copytree(root / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(root / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("kzoo-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {n.split("/")[-1][: -len(".json")] for n in names if n.startswith("kzoo/_presets/") and n.endswith(".json")}
    assert shipped == set(list_presets())
    assert "kzoo/models/bert/bert_backbone.py" in names
    # Every module ships: a package missing from pyproject.toml's list works from the source tree only.
    modules = {p.relative_to(source).as_posix() for package in ("kzoo", "kzoo_cli")
               for p in (source / package).rglob("*.py")}
    assert modules <= names, sorted(modules - names)
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    assert "kzoo = kzoo_cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
