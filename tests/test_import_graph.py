"""kzoo's import graph, read from the source with `ast`: dependencies point
one way: the generic packages (layers, data, tokenizers) import no model
family; models -> presets -> checkpoints, neither of the last two importing a
model (they build the class they are given, or Keras's registered `kzoo>`
class); no module is part of an import circle."""

import ast
import pathlib

import pytest

KZOO = pathlib.Path(__file__).resolve().parents[1] / "kzoo"
pytestmark = pytest.mark.backend_independent  # reads source files: once (tests/conftest.py)


def module_names(root, package):
    """{module name: file} for every .py file under `root` (package `package`)."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join((package, *parts))] = path
    return names


def _imported(node, module, is_package, modules):
    """The modules of `modules` an `import` / `from ... import` node loads."""
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:  # relative: from the module's package, `level - 1` packages up
            package = module.split(".") if is_package else module.split(".")[:-1]
            package = package[: len(package) - (node.level - 1)]
            base = ".".join(package + ([base] if base else []))
        # `from a import b` loads the module a.b if there is one, else a (b is a name in it).
        targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
    found = set()
    for target in targets:
        while target and target not in modules:  # `import a.b.c` of a name inside a.b
            target = target.rpartition(".")[0]
        if target:
            found.add(target)
    return found


def import_graph(root=KZOO, package="kzoo"):
    """{module: set of the package's modules it imports}, every import statement
    counted: at the top, inside functions and classes, under conditions.

    An import names the module it loads; the parent packages it passes
    through are not edges (Python has them in `sys.modules` already while
    their `__init__` runs).
    """
    modules = module_names(root, package)
    graph = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        graph[module] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[module] |= _imported(node, module, is_package, modules)
        graph[module].discard(module)
    return graph


def cycles(graph):
    """The strongly connected components of `graph` with more than one module
    (Tarjan's algorithm): each is an import circle."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def reachable(graph, start):
    """Every module `start` imports, directly or through others."""
    seen, todo = set(), [start]
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def _in(module, *packages):
    return any(module == p or module.startswith(p + ".") for p in packages)


GRAPH = import_graph()


def test_graph_reads_imports_everywhere_in_a_file(tmp_path):
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("from pkg import a\n")
    (root / "a.py").write_text("import os\n\ndef f():\n    from pkg.sub import b\n    return b\n")
    (root / "sub" / "__init__.py").write_text("")
    (root / "sub" / "b.py").write_text("from .. import a\nfrom . import c\nfrom pkg.sub.c import VALUE\n")
    (root / "sub" / "c.py").write_text("VALUE = 1\n")
    graph = import_graph(root, "pkg")
    assert graph == {
        "pkg": {"pkg.a"},
        "pkg.a": {"pkg.sub.b"},
        "pkg.sub": set(),
        "pkg.sub.b": {"pkg.a", "pkg.sub.c"},
        "pkg.sub.c": set(),
    }
    assert cycles(graph) == [["pkg.a", "pkg.sub.b"]]


def test_graph_covers_kzoo():
    assert {"kzoo", "kzoo.presets", "kzoo.checkpoints", "kzoo.checkpoints.huggingface"} <= GRAPH.keys()
    assert "kzoo.checkpoints.bert_weights" in GRAPH["kzoo.checkpoints.huggingface"]
    assert "kzoo.checkpoints" in GRAPH["kzoo.presets"]  # from_preset reads the checkpoint formats


@pytest.mark.parametrize("package", ["kzoo.layers", "kzoo.data", "kzoo.tokenizers"])
def test_generic_package_imports_no_model(package):
    modules = sorted(m for m in GRAPH if _in(m, package))
    assert modules
    offending = {f"{m}: {t}" for m in modules for t in GRAPH[m] if _in(t, "kzoo.models")}
    assert not offending, sorted(offending)


def test_presets_and_checkpoints_import_no_model():
    for module in sorted(m for m in GRAPH if _in(m, "kzoo.presets", "kzoo.checkpoints")):
        reached = reachable(GRAPH, module)
        assert not {m for m in reached if _in(m, "kzoo.models")}, module
        assert "kzoo" not in reached, f"{module} imports the kzoo package, and with it every model"


def test_models_import_no_checkpoint_format():
    for module in sorted(m for m in GRAPH if _in(m, "kzoo.models")):
        assert not {m for m in GRAPH[module] if _in(m, "kzoo.checkpoints")}, module


def test_presets_and_checkpoints_are_in_no_import_circle():
    circles = [c for c in cycles(GRAPH) if any(_in(m, "kzoo.presets", "kzoo.checkpoints") for m in c)]
    assert not circles, circles


def test_kzoo_has_no_import_circle():
    assert not cycles(GRAPH), cycles(GRAPH)
