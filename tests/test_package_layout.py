"""The package's shape: imports flow one way (no circles) and no module grows past what one can read.

The import graph is read from the source (``ast``): every import a module can run, at
module level or inside a function; imports under ``if TYPE_CHECKING:`` load nothing and
are left out. ``from . import x`` and ``from .pkg import sub`` count as importing that
module; importing ``pkg.sub`` counts ``pkg.sub`` only.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "otel_agent_eval"
MAX_LINES = 550



def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        type_only = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING"
            for stmt in node.body
            for inner in ast.walk(stmt)
        }
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in type_only:
                continue
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".") if package else []
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join([*base, *([node.module] if node.module else [])])
                elif (node.module or "").startswith("otel_agent_eval"):
                    target = node.module.removeprefix("otel_agent_eval").lstrip(".")  # type: ignore[union-attr]
                else:
                    continue
                for alias in node.names:
                    sub = f"{target}.{alias.name}" if target else alias.name
                    deps.add(sub if sub in modules else target)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("otel_agent_eval"):
                        deps.add(alias.name.removeprefix("otel_agent_eval").lstrip("."))
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.add(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_package_has_no_import_circles() -> None:
    found = cycles(import_graph())
    assert found == set(), sorted(sorted(c) for c in found)


def test_the_checker_sees_circles() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {frozenset("abc")}
    graph = import_graph()
    assert "pipeline.core" in graph["intake.processor"] or "pipeline.build" in graph["intake.processor"]


def test_no_module_is_longer_than_one_can_read() -> None:
    lengths = {str(p.relative_to(PACKAGE)): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    large = {path for path, n in lengths.items() if n > MAX_LINES}
    assert large == set(), {path: lengths[path] for path in large}
