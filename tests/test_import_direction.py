"""Dependencies point one way (issue 17): the generic packages, layers, data and
tokenizers, never import the model families (`kzoo.models`), at module level or
inside a function."""

import ast
from pathlib import Path

import pytest

KZOO = Path(__file__).resolve().parents[1] / "kzoo"
GENERIC_PACKAGES = ("layers", "data", "tokenizers")


def _imported_modules(path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


@pytest.mark.backend_independent  # reads source files: once (tests/conftest.py)
@pytest.mark.parametrize("package", GENERIC_PACKAGES)
def test_generic_package_imports_no_model(package):
    files = sorted((KZOO / package).rglob("*.py"))
    assert files
    offending = {
        f"{path.relative_to(KZOO.parent)}: {name}"
        for path in files
        for name in _imported_modules(path)
        if name == "kzoo.models" or name.startswith("kzoo.models.")
    }
    assert not offending, sorted(offending)
