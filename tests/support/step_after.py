"""The two-operator pipeline the epoch and entry-step tests run: ``step`` (relabels; the
entry operator), then ``after`` (kept apart, so ``step``'s outputs and declarations cross
a topic the tests read)."""

from __future__ import annotations

from typing import Any

OPERATORS: list[dict[str, Any]] = [
    {"name": "step", "code": "tests.support.engine_ops:relabel", "et_ms": 0.1,
     "max_replicas": 2},
    {"name": "after", "code": "tests.support.engine_ops:relabel", "et_ms": 0.1,
     "max_replicas": 2, "chain": False},
]  # fmt: skip
EDGES: list[dict[str, str]] = [{"from": "source", "to": "step"}, {"from": "step", "to": "after"}]


def step_after(source: dict[str, Any] | None = None) -> dict[str, Any]:
    """The topology document, with ``source`` when given."""
    doc: dict[str, Any] = {"operators": OPERATORS, "edges": EDGES}
    return doc if source is None else {"source": source, **doc}
