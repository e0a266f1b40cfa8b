"""The package's structure, checked with ordinary tools (issue: one problem, one route).

- no import cycle between the package's modules, function-level imports included;
- no module above ``MAX_MODULE_LINES`` lines, and no function whose code (its docstring
  left out: the public verbs carry long numpydoc docstrings) is above
  ``MAX_FUNCTION_LINES`` lines;
- the layering: the lower layers never import the verbs, the route table, the tuning
  package or the estimators.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

import aloocv

PKG = pathlib.Path(aloocv.__file__).parent
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 120


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    # compiled modules count by their stubs (``_core.pyi``)
    for path in sorted([*PKG.rglob("*.py"), *PKG.rglob("*.pyi")]):
        rel = path.relative_to(PKG).with_suffix("")
        parts = ["aloocv", *rel.parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _resolve(module: str, is_pkg: bool, node: ast.ImportFrom, mods: dict) -> list[str]:
    """The package modules an ``import from`` depends on: ``pkg.name`` where the name is
    a submodule (``from . import _core`` depends on ``aloocv._core``, not on the package
    ``__init__``), else the module it names."""
    if node.level:
        base = module.split(".")
        if not is_pkg:
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    return [f"{target}.{a.name}" if f"{target}.{a.name}" in mods else target for a in node.names]


def import_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports anywhere in its body."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                targets = _resolve(name, is_pkg, node, mods)
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph[name] |= {t for t in targets if t in mods and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_check_can_fail():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle():
    found = cycles(import_graph())
    assert found == [], f"import cycles: {found}"


# Lower layers -> what they must never import (upper layers).
LAYERS = {
    "aloocv.problem": ("aloocv.api", "aloocv.backends", "aloocv.tuning", "aloocv.estimators"),
    "aloocv.results": ("aloocv.api", "aloocv.backends", "aloocv.tuning", "aloocv.estimators"),
    "aloocv.folds": ("aloocv.api", "aloocv.backends", "aloocv.tuning", "aloocv.estimators"),
    "aloocv.losses": ("aloocv.api", "aloocv.backends", "aloocv.problem", "aloocv.results"),
    "aloocv.penalties": ("aloocv.api", "aloocv.backends", "aloocv.problem", "aloocv.results"),
    "aloocv._validation": ("aloocv.api", "aloocv.backends", "aloocv.problem", "aloocv.results"),
    "aloocv._diagnostics": ("aloocv.api", "aloocv.backends", "aloocv.problem", "aloocv.results"),
    "aloocv._memory": ("aloocv.api", "aloocv.backends", "aloocv.problem", "aloocv.results"),
    "aloocv._progress": ("aloocv.api", "aloocv.backends", "aloocv.problem", "aloocv.results"),
    "aloocv.backends.memory": ("aloocv.api", "aloocv.tuning", "aloocv.backends.dask"),
    "aloocv.backends.dask": ("aloocv.api", "aloocv.tuning", "aloocv.backends.memory"),
}


@pytest.mark.parametrize("lower", sorted(LAYERS))
def test_layering(lower):
    graph = import_graph()
    for mod, deps in graph.items():
        if mod != lower and not mod.startswith(lower + "."):
            continue
        bad = sorted(d for d in deps if d.startswith(LAYERS[lower]))
        assert not bad, f"{mod} imports upper layers {bad}"


def test_module_sizes():
    long = {
        str(p.relative_to(PKG)): n
        for p in PKG.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, f"modules above {MAX_MODULE_LINES} lines: {long}"


def test_function_sizes():
    long = {}
    for path in PKG.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                doc = node.body[0]
                if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant):
                    n -= doc.end_lineno - doc.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(PKG)}:{node.name}"] = n
    assert long == {}, f"functions above {MAX_FUNCTION_LINES} lines: {long}"
