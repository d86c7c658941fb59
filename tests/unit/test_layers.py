"""The library's layers: the library (shared/, installed as ``elastic_sps``) imports no
service, and no two modules import each other, directly or round a longer loop (imports
inside functions count: they only defer one)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
# each folder of the checkout and the package it is installed as
PACKAGES = {"shared": "elastic_sps", "services": "elastic_sps.services"}
SERVICES = "elastic_sps.services"


def modules() -> dict[str, Path]:
    out = {}
    for folder_name, package in PACKAGES.items():
        for path in (ROOT / folder_name).rglob("*.py"):
            parts = path.relative_to(ROOT / folder_name).with_suffix("").parts
            name = ".".join((package, *parts))
            out[name.removesuffix(".__init__")] = path
    return out


def is_service(module: str) -> bool:
    return module == SERVICES or module.startswith(SERVICES + ".")


def imported(tree: ast.AST, known: dict[str, Path]) -> Iterator[str]:
    """The project modules a module imports: ``from pkg import sub`` names ``pkg.sub`` when
    that is a module, else ``pkg``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                if sub in known:
                    yield sub
                elif node.module in known:
                    yield node.module


def graph() -> dict[str, set[str]]:
    known = modules()
    return {
        name: {m for m in imported(ast.parse(path.read_text()), known) if m != name}
        for name, path in known.items()
    }


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_finder_sees_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles():
    assert cycles(graph()) == []


def test_the_library_imports_no_service():
    wrong = [(a, b) for a, deps in graph().items() if not is_service(a) for b in deps]
    assert [(a, b) for a, b in wrong if is_service(b)] == []


def folder(module: str) -> str:
    """The layer a module of the library belongs to: its folder (``elastic_sps.io``), or itself
    for a module at the top (``elastic_sps.settings``)."""
    parts = module.split(".")
    return ".".join(parts[:2])


def folder_graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for a, deps in graph().items():
        if is_service(a):
            continue
        edges.setdefault(folder(a), set()).update(
            folder(b) for b in deps if not is_service(b) and folder(b) != folder(a)
        )
    return edges


def test_the_folders_of_the_library_form_layers_without_loops():
    assert cycles(folder_graph()) == []


def test_the_live_ingress_does_not_import_the_simulator():
    ingress = [a for a in graph() if a.startswith("elastic_sps.services.ingress")]
    assert [
        (a, b) for a in ingress for b in graph()[a] if b.startswith("elastic_sps.simulation")
    ] == []
