"""What each operator costs, measured on sample events (``et_ms`` may be left out).

Each operator runs, in topological order, on what its predecessors emitted for the
sample events (the entry operators on the samples themselves): per event, the wall time
of ``process`` plus the envelope's decode and encode (the per-event work a replica adds
around the user's code), and the thread's CPU time over the same span. ``et_ms`` is the
mean wall time, ``cpu_share`` CPU over wall: near 1 the work is CPU-bound (its replicas
need cores), near 0 it waits (a remote call; replicas as threads are capacity).
The work is the engine's own per-event core (``engine``) on an in-memory partition, as
the dataplane runs it. The policies then combine it with what the live operators
report, as PA-SPS does:
``max(benchmark, observed)``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from elastic_sps.io.envelope import Envelope, decode
from elastic_sps.io.knowledge_base import KnowledgeBase
from elastic_sps.model.topology import Topology
from elastic_sps.pipeline.chain import MemberFailed, open_runnable
from elastic_sps.pipeline.engine import Event, OperatorCore
from elastic_sps.pipeline.failures import describe
from elastic_sps.pipeline.local_store import MemoryStore
from elastic_sps.pipeline.operators import Context, DiscardedWrites, Runnable

WARMUP_EVENTS = 20  # first calls fill caches and compile regexes: not the steady cost
MAX_EVENTS = 500


@dataclass(frozen=True)
class OperatorCost:
    operator: str
    et_ms: float
    cpu_share: float
    events: int  # how many events it was measured on
    failed: int  # how many of them raised (measured without them)


def measure(
    topo: Topology,
    samples: Iterable[Any],
    redis: Any = None,
    prefix: str = "sps",
    max_events: int = MAX_EVENTS,
) -> dict[str, OperatorCost]:
    """Every operator's cost on (up to ``max_events`` of) ``samples``' path through the
    DAG; a chained topology's members each on its own (``with_costs`` sums them).
    Raises ``OperatorLoadError`` for code that does not import or open."""
    topo = topo.declared
    inbox: dict[str, list[Any]] = {n: [] for n in topo.names}
    first = list(samples)[: max_events + WARMUP_EVENTS]
    for e in topo.successors["source"]:
        inbox[e.dst].extend(first)
    out: dict[str, OperatorCost] = {}
    for name in topo.order:
        writes = redis.pipeline(transaction=False) if redis is not None else DiscardedWrites()
        ctx = Context(name, redis, prefix, writes)
        inst = open_runnable(topo, name, ctx)
        try:
            cost, emitted = _run(topo, name, inst, ctx, inbox[name][: max_events + WARMUP_EVENTS])
        finally:
            inst.close()
        out[name] = cost
        for dst, payload in emitted:
            for s in [dst] if dst is not None else [e.dst for e in topo.successors[name]]:
                inbox[s].append(payload)
    return out


def _run(
    topo: Topology, name: str, inst: Runnable, ctx: Context, events: list[Any]
) -> tuple[OperatorCost, list[tuple[str | None, Any]]]:
    wall = cpu = 0.0
    timed = failed = 0
    emitted: list[tuple[str | None, Any]] = []
    first_error = ""
    core = OperatorCore(topo, name, inst)
    store = MemoryStore()
    for k, payload in enumerate(events):
        event_id = f"sample-{k}"
        w0, c0 = time.perf_counter(), time.thread_time()
        try:
            raw = Envelope(event_id, 0.0, "source", payload).encode()
            members_failed: list[MemberFailed] = []
            out = core.apply(Event(event_id, decode(raw).payload, 0.0), ctx, store, members_failed)
            if members_failed:  # a chained member rejects it: the chain's sample fails
                raise members_failed[0].error
            for _, out_id, p in out:
                Envelope(out_id, 0.0, name, p).encode()
        except Exception as exc:  # the sample the operator rejects: not part of its cost
            failed += 1
            first_error = first_error or describe(exc).reason
            continue
        result = [(dst, p) for dst, _, p in out]
        w1, c1 = time.perf_counter(), time.thread_time()
        emitted.extend(result)
        if k >= WARMUP_EVENTS or len(events) <= WARMUP_EVENTS:
            wall += w1 - w0
            cpu += c1 - c0
            timed += 1
    if timed == 0:
        raise ValueError(
            f"operator {name!r}: none of its {len(events)} sample events went through "
            f"({failed} raised; the first: {first_error})"
        )
    et_ms = max(1e-3, 1000.0 * wall / timed)
    share = min(1.0, max(0.0, cpu / wall)) if wall > 0 else 1.0
    return OperatorCost(name, round(et_ms, 4), round(share, 3), timed, failed), emitted


def as_costs(costs: Mapping[str, OperatorCost]) -> dict[str, tuple[float, float | None]]:
    """``Topology.with_costs``'s argument."""
    return {n: (c.et_ms, c.cpu_share) for n, c in costs.items()}


def publish(redis: Any, prefix: str, costs: Mapping[str, OperatorCost]) -> None:
    """The measured costs in the knowledge base, for the services whose topology left
    ``et_ms`` out (they wait for them: ``resolved``)."""
    KnowledgeBase(redis, prefix).publish_costs(as_costs(costs))


def resolved(topo: Topology, redis: Any, prefix: str, wait_s: float = 300.0) -> Topology:
    """The topology with every operator's cost: as declared, else as the dataplane
    measured and published it (waiting up to ``wait_s`` for it to do so)."""
    if topo.measured:
        return topo
    deadline = time.monotonic() + wait_s
    while True:
        found = KnowledgeBase(redis, prefix).costs()
        declared = topo.declared.operators  # what ``measure`` publishes: members apart
        if all(op.et_ms is not None or op.name in found for op in declared):
            return topo.with_costs({n: (float(v[0]), v[1]) for n, v in found.items()})
        if time.monotonic() > deadline:
            missing = [op.name for op in declared if op.et_ms is None and op.name not in found]
            raise TimeoutError(
                f"no measured et_ms for {missing} after {wait_s:.0f} s: the dataplane "
                "measures them at start (or declare et_ms in the topology)"
            )
        time.sleep(0.5)


def service_topology(settings: Any) -> Topology:
    """A service's topology (``settings.topology``): with its operators' costs, waiting
    for the dataplane's measurement when the topology leaves ``et_ms`` out."""
    from elastic_sps.io.redis_client import redis_client
    from elastic_sps.model import topology

    topo = topology.load(settings.topology)
    if topo.measured:
        return topo
    return resolved(topo, redis_client(settings.redis_url), settings.key_prefix)
