"""Operator logic of the example applications. An operator is a function
``(payload, ctx) -> list[(successor or None, payload)]``: ``None`` sends the output to every
successor. It raises ``BadEvent`` for input it cannot take. Operators of topologies with
no application here pass events on, each edge keeping its declared fraction."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from typing import Any

from services.dataplane.apps import advertising, log, twitter
from shared.topology import Topology

Output = list[tuple[str | None, Any]]
OperatorFn = Callable[[Any, Any], Output]  # (payload, Context)


class Context:
    """What an operator may use: a Redis client for reads, ``writes`` (a pipeline the
    replica executes once per micro-batch: a sink's per-event round trip cost 107 of a
    task's 124 ms), its name and the current event's id."""

    def __init__(
        self, operator: str, redis: Any, prefix: str, event_id: str = "", writes: Any = None
    ) -> None:
        self.operator = operator
        self.redis = redis
        self.prefix = prefix
        self.event_id = event_id
        self.writes = writes if writes is not None else redis


APPS: dict[str, Mapping[str, OperatorFn]] = {
    "twitter": twitter.OPERATORS,
    "log": log.OPERATORS,
    "advertising": advertising.OPERATORS,
}


def passthrough(topo: Topology, name: str) -> OperatorFn:
    """Forward to each successor with its declared fraction (deterministic per event id)."""
    edges = topo.successors[name]

    def run(payload: Any, ctx: Context) -> Output:
        out: Output = []
        h = zlib.crc32(f"{ctx.event_id}:{name}".encode()) / 2**32
        for e in edges:
            whole, frac = int(e.fraction), e.fraction - int(e.fraction)
            copies = whole + (1 if h < frac else 0)
            out.extend((e.dst, payload) for _ in range(copies))
        return out

    return run


def operator_fn(topo: Topology, name: str) -> OperatorFn:
    return APPS.get(topo.application, {}).get(name) or passthrough(topo, name)
