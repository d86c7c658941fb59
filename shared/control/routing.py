"""One router for every producer into the dataplane (the ingress, each replica): its view
of a successor (active count, replicas' utilisation from their backlogs) and the
load-aware router built on it (``grouping.LoadAwareRouter``); a keyed successor's events
go to the partition of their key instead (``elastic_sps.model.keyed``), whatever the count."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable
from typing import Any

from elastic_sps.control.grouping import ROUTING_REFRESH_S, LoadAwareRouter, backlog_utilisation
from elastic_sps.io.knowledge_base import KnowledgeBase
from elastic_sps.io.rescale_timeline import CountWatch
from elastic_sps.model.keyed import partition_of_key
from elastic_sps.model.records import lookup_first


class RoutingView:
    """Each successor's active count and its replicas' utilisation, re-read from the
    knowledge base at most every ``ROUTING_REFRESH_S`` and shared by every router of its
    owner (thread-safe). A count that differs from the one ``watch`` last saw is a change
    taking effect: the routers send to the new replicas from now on (their standby slots
    serve them, ``slots.plan_slots``), so it is recorded as the change's effect; not for
    a keyed successor, whose events go by key whatever the count: its change takes
    effect when the stream reader plans a batch with it."""

    def __init__(self, kb: KnowledgeBase, topology: Any, td: float, watch: CountWatch) -> None:
        self.kb, self.topo, self.td, self.watch = kb, topology, td, watch
        self._seen: dict[str, tuple[float, int, list[float]]] = {}
        self._lock = threading.Lock()

    def read(self, successor: str) -> tuple[int, list[float]]:
        with self._lock:
            at, n, util = self._seen.get(successor, (-math.inf, 0, []))
            if time.monotonic() - at < ROUTING_REFRESH_S:
                return n, util
            op = self.topo[successor]
            n = self.kb.active(op)
            backlog = self.kb.backlog(successor, op.max_replicas)
            util = backlog_utilisation(backlog[:n], op.et_s, self.td)
            self._seen[successor] = (time.monotonic(), n, util)
            if not op.stateful:  # a keyed operator's count takes effect at a batch's plan
                self.watch.see(successor, n)
        return n, util

    def router(self, successor: str, concurrency: int = 1, start: int = 0) -> LoadAwareRouter:
        _, util = self.read(successor)
        return LoadAwareRouter(
            self.topo[successor].et_s, self.td, util, concurrency=concurrency, start=start
        )


class Routers:
    """One producer's routers, one per successor. Checked every ``ROUTING_REFRESH_S``
    (a task window outlasts it); a router is rebuilt when its successor's count changed,
    or, with ``rebuild_s``, when it is that old. A dataplane replica keeps its routers
    while the count holds: restarted from the backlog snapshot every 0.2 s, each
    restart's first events would go to the same replicas."""

    def __init__(
        self,
        view: RoutingView,
        successors: Iterable[str],
        concurrency: int = 1,
        start: int = 0,
        rebuild_s: float = math.inf,
    ) -> None:
        self.view, self.successors = view, list(successors)
        self.concurrency, self.start, self.rebuild_s = concurrency, start, rebuild_s
        self.routers: dict[str, LoadAwareRouter] = {}
        # a keyed successor's key paths, key groups and partitions (empty: not keyed),
        # looked up once: ``choose`` runs per output
        self._by_key: dict[str, tuple[Any, ...]] = {}
        self._checked = self._built = -math.inf

    def refresh(self) -> None:
        now = time.monotonic()
        if now - self._checked < ROUTING_REFRESH_S:
            return
        self._checked = now
        stale = now - self._built >= self.rebuild_s
        if stale:
            self._built = now
        for s in self.successors:
            if self._keyed(s):  # its events go by key: no count or backlog to read
                continue
            n, _ = self.view.read(s)
            if stale or s not in self.routers or len(self.routers[s].u) != n:
                self.routers[s] = self.view.router(s, self.concurrency, self.start)

    def _keyed(self, successor: str) -> tuple[Any, ...]:
        """A keyed successor's key paths, key groups and partitions; () if not keyed."""
        by_key = self._by_key.get(successor)
        if by_key is None:
            op = self.view.topo[successor]
            by_key = self._by_key[successor] = (
                (op.key_path, op.key_groups, int(op.max_replicas)) if op.stateful else ()
            )
        return by_key

    def choose(self, successor: str, payload: Any = None) -> int:
        """The partition of ``successor`` that gets ``payload``: its key's, for a keyed
        successor (an event without a key goes to the empty key's: the successor
        dead-letters it), else the least loaded active replica's."""
        by_key = self._by_key.get(successor)
        if by_key is None:
            by_key = self._keyed(successor)
        if by_key:
            paths, groups, partitions = by_key
            key = lookup_first(payload, paths) if paths else ""
            return partition_of_key(key or "", groups, partitions)
        return self.routers[successor].choose()
