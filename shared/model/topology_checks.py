"""What makes a topology valid (names, bounds, edges, no cycle, every operator reached),
and its operators in topological order; ``elastic_sps.model.topology`` runs them on every
topology it builds."""

from __future__ import annotations

import math
from typing import Any

# what a replica does with an event its operator raised on (elastic_sps.pipeline.failures)
ON_ERROR = ("dead-letter", "fail")
SOURCE = "source"


class TopologyError(ValueError):
    """A topology that cannot run; the message names the operator or edge at fault."""


# An operator whose measured CPU share (thread CPU time over wall time per event) is at
# least this is CPU-bound: its replicas need cores (separate Spark tasks), not threads.


def validate(topo: Any) -> None:
    """Raise ``TopologyError`` naming the first thing wrong with ``topo``."""
    if not topo.operators:
        raise TopologyError(f"topology {topo.name!r}: no operators")
    seen: set[str] = set()
    for op in topo.operators:
        where = f"topology {topo.name!r}, operator {op.name!r}"
        if not op.name or op.name == SOURCE:
            raise TopologyError(f"{where}: the name {SOURCE!r} (or empty) is reserved")
        if op.name in seen:
            raise TopologyError(f"{where}: declared twice")
        seen.add(op.name)
        if op.et_ms is not None and not (math.isfinite(op.et_ms) and op.et_ms > 0):
            raise TopologyError(f"{where}: et_ms must be a positive finite number, got {op.et_ms}")
        if op.on_error not in ON_ERROR:
            raise TopologyError(f"{where}: on_error must be one of {ON_ERROR}, got {op.on_error!r}")
        if op.cpu_share is not None and not 0 <= op.cpu_share <= 1:
            raise TopologyError(f"{where}: cpu_share must be within [0, 1], got {op.cpu_share}")
        if op.min_replicas < 0:
            raise TopologyError(f"{where}: min_replicas {op.min_replicas} is negative")
        if op.max_replicas < 1:
            raise TopologyError(f"{where}: max_replicas must be at least 1")
        if op.key and op.key_groups < op.max_replicas:
            raise TopologyError(
                f"{where}: key_groups {op.key_groups} is below max_replicas {op.max_replicas}"
            )
        if op.state_ttl_s is not None and (not op.key or op.window is not None):
            raise TopologyError(
                f"{where}: state_ttl_s goes with a keyed operator's state (key:, no window:)"
            )
        if op.state_ttl_s is not None and not (
            math.isfinite(op.state_ttl_s) and op.state_ttl_s > 0
        ):
            raise TopologyError(f"{where}: state_ttl_s must be positive, got {op.state_ttl_s}")
        if op.min_replicas > op.max_replicas:
            raise TopologyError(
                f"{where}: min_replicas {op.min_replicas} is above max_replicas {op.max_replicas}"
            )
    pairs: set[tuple[str, str]] = set()
    for e in topo.edges:
        where = f"topology {topo.name!r}, edge {e.src} -> {e.dst}"
        for end in (e.src, e.dst):
            if end != SOURCE and end not in seen:
                raise TopologyError(f"{where}: unknown operator {end!r}")
        if e.dst == SOURCE:
            raise TopologyError(f"{where}: nothing may flow into {SOURCE!r}")
        if not (math.isfinite(e.fraction) and e.fraction >= 0):
            raise TopologyError(f"{where}: fraction must be finite and >= 0, got {e.fraction}")
        if (e.src, e.dst) in pairs:
            raise TopologyError(f"{where}: declared twice")
        pairs.add((e.src, e.dst))
    toposort(topo)  # raises on a cycle
    reached = {SOURCE}
    frontier = [SOURCE]
    while frontier:
        node = frontier.pop()
        for e in topo.edges:
            if e.src == node and e.dst not in reached:
                reached.add(e.dst)
                frontier.append(e.dst)
    for op in topo.operators:
        if op.name not in reached:
            raise TopologyError(
                f"topology {topo.name!r}, operator {op.name!r}: no path from {SOURCE!r} reaches it"
            )


def toposort(topo: Any) -> tuple[str, ...]:
    indeg = {op.name: 0 for op in topo.operators}
    for e in topo.edges:
        if e.src != SOURCE and e.dst in indeg:
            indeg[e.dst] += 1
    ready = [n for n in indeg if indeg[n] == 0]
    out: list[str] = []
    while ready:
        node = ready.pop(0)
        out.append(node)
        for e in topo.edges:
            if e.src == node:
                indeg[e.dst] -= 1
                if indeg[e.dst] == 0:
                    ready.append(e.dst)
    if len(out) != len(indeg):
        stuck = sorted(n for n in indeg if n not in out)
        raise TopologyError(f"topology {topo.name!r}: cycle through operators {stuck}")
    return tuple(out)
