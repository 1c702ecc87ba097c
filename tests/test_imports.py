"""Every gemmtune module imports on a CPU, and the package's module-level imports form no cycle.

A cycle works until someone reorders an import (then one side sees a half-initialised
module); the graph is built from the source (``ast``): intra-package imports written at
module level, not those inside functions, which are the deliberate way to defer one.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import gemmtune

PKG = Path(gemmtune.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = ("gemmtune", *path.relative_to(PKG).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _module_level(tree: ast.Module):
    """Import statements outside functions and classes (``if``/``try`` blocks included)."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            todo += [n for field in ("body", "orelse", "finalbody", "handlers") for n in getattr(node, field, [])]
        elif isinstance(node, ast.ExceptHandler):
            todo += node.body


def _targets(name: str, path: Path, node) -> set[str]:
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in MODULES}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    if node.level:
        base = package.split(".")
        base = ".".join(base[:len(base) - node.level + 1])
        base = f"{base}.{node.module}" if node.module else base
    else:
        base = node.module or ""
    out = set()
    for a in node.names:  # `from pkg import mod` imports the module pkg.mod
        sub = f"{base}.{a.name}"
        out.add(sub if sub in MODULES else base)
    return {t for t in out if t in MODULES and t != name}


def import_graph() -> dict[str, set[str]]:
    return {name: set().union(*(_targets(name, path, n) for n in _module_level(ast.parse(path.read_text()))))
            for name, path in MODULES.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(u: str) -> list[str] | None:
        state[u] = 1
        stack.append(u)
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                return stack[stack.index(v):] + [v]
            if v not in state and (c := visit(v)):
                return c
        stack.pop()
        state[u] = 2
        return None

    for u in sorted(graph):
        if u not in state and (c := visit(u)):
            return c
    return None


def test_the_graph_sees_the_imports():
    g = import_graph()
    assert "gemmtune.bench.measure" in g["gemmtune.bench.runner"]
    assert "gemmtune.kernels" in g["gemmtune.bench.measure"]          # from .. import kernels
    assert "gemmtune.model.choices" in g["gemmtune.model.analytic"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_imports(name):
    importlib.import_module(name)


def _deferred_imports(tree: ast.Module):
    """Import statements inside functions and classes: run only when called, so an import that
    names a module or name that is not there fails late (after a file was moved into a package)."""
    top = set(map(id, _module_level(tree)))
    return [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level and id(n) not in top]


def test_every_deferred_relative_import_resolves():
    bad = []
    for name, path in MODULES.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _deferred_imports(ast.parse(path.read_text())):
            parts = package.split(".")
            base = ".".join(parts[:len(parts) - node.level + 1])
            mod = f"{base}.{node.module}" if node.module else base
            if mod not in MODULES:
                bad.append(f"{name}:{node.lineno}: no module {mod}")
                continue
            m = importlib.import_module(mod)
            bad += [f"{name}:{node.lineno}: {mod} has no {a.name}" for a in node.names
                    if not hasattr(m, a.name) and f"{mod}.{a.name}" not in MODULES]
    assert not bad, "\n".join(bad)


def test_the_cli_parser_does_not_import_dynamo_or_lightgbm():
    """Building the CLI's parser imported torch._dynamo (2.4 s on the 2-core CPU machine, paid by
    every gemmtune command) through a module-level read in benchmodel.run; lightgbm (and the
    scikit-learn it imports) is loaded only where a ranker is. A fresh process, so that nothing
    this test session imported counts."""
    import subprocess
    import sys
    code = ("import sys, gemmtune.cli as c; c.build_parser(); "
            "print(sorted(m for m in ('torch._dynamo', 'lightgbm', 'sklearn') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, "PYTHONPATH": str(PKG.parent)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


def test_prefetch_lightgbm_imports_it_on_a_thread(monkeypatch):
    import sys
    from gemmtune.model import regressors
    pytest.importorskip("lightgbm")
    assert regressors.prefetch_lightgbm() is None  # already imported here: nothing to do
    monkeypatch.delitem(sys.modules, "lightgbm")
    t = regressors.prefetch_lightgbm()
    assert t is not None and t.daemon
    t.join(120)
    assert not regressors.lightgbm_importing()
    assert "lightgbm" in sys.modules and regressors.import_lightgbm() is sys.modules["lightgbm"]
