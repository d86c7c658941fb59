"""What every replica slot of one task shares: options, clients, the user's operator, its
failure guard and the routing view of its successors; and the slot's dead letters."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from elastic_sps.contracts.action import DeadLetter
from elastic_sps.control.routing import Routers, RoutingView
from elastic_sps.io.knowledge_base import Keys, KnowledgeBase, active_count
from elastic_sps.io.rescale_timeline import CountWatch
from elastic_sps.io.tracked_producer import TrackedProducer
from elastic_sps.pipeline.chain import ChainedOperator, open_runnable
from elastic_sps.pipeline.engine import OperatorCore
from elastic_sps.pipeline.failures import Failure, FailureGuard
from elastic_sps.pipeline.operators import Context, Runnable
from elastic_sps.services.dataplane.admission import AdmissionCounts, EntryGate, WakeBoard
from elastic_sps.services.dataplane.options import SourceOptions
from elastic_sps.services.dataplane.worker import WORKER

# How often a replica's routers start again from the successors' backlogs inside an
# epoch: as often as each task built them when epochs were 5 s long.
ROUTERS_REBUILD_S = 5.0


@dataclass
class GroupRun:
    """What every slot of one task shares: options, clients, the operator."""

    o: SourceOptions
    operator: str
    active: int

    def __post_init__(self) -> None:
        from elastic_sps.io.redis_client import redis_client

        o = self.o
        self.topo = WORKER.get(("topo", o.topology_name, o.topology_doc), o.topology)
        self.r = WORKER.get(("redis", o.redis_url), lambda: redis_client(o.redis_url))
        self.keys = Keys(o.prefix)
        self.kb = KnowledgeBase(self.r, self.keys)
        self.td = o.td
        self.producer: TrackedProducer = WORKER.get(
            ("producer", o.bootstrap, o.redis_url, self.keys.prefix),
            lambda: TrackedProducer(o.bootstrap, self.r, self.keys),
        )
        self.op = self.topo[self.operator]
        # the user's operator: opened once per worker process (a model, a client), and
        # its failure guard outlives a batch, so a share of failures spans batches
        self.impl: Runnable = WORKER.get(
            ("operator", self.operator, self.op.code, self.keys.prefix), self._open_operator
        )
        self.guard = self._guard("guard", o)
        # a chain's members after its head each judged on the inputs it gets (a fired
        # window, an output of the member before), as unchained: neither diluted by
        # the head's events nor swollen by a fan-out's
        members = self.impl.after_head_names if isinstance(self.impl, ChainedOperator) else ()
        self.member_guards = {m: self._guard("guard", o, m) for m in members}
        # admission at the entry step: the operator reads the source's partitions
        self.admits = o.entry_topic is not None and self.operator == self.topo.entry_operators[0]
        self.partitions = o.entry_partitions if self.admits else int(self.op.max_replicas)
        # the per-event engine: the operator's steps, windows and watermarks
        learnt = self.topo.entry_operators[:1] if o.entry_topic is not None else ()
        self.core = OperatorCore(self.topo, self.operator, self.impl, self.partitions, learnt)
        self.guard_lock = threading.Lock()
        self.cost_mode = o.cost_mode
        self.t_out = o.t_out_s
        self.successors = [e.dst for e in self.topo.successors[self.operator]]
        self.successor_topics = {s: self.keys.topic(s) for s in self.successors}
        self.entry = self.operator in self.topo.entry_operators  # LAS samples its events
        self.topic = (
            o.entry_topic if self.admits and o.entry_topic else self.keys.topic(self.operator)
        )
        self._admission(o)
        # where this operator's declarations go: every partition of every successor
        self.declare_to = [
            (self.keys.topic(s), j)
            for s in self.successors
            for j in range(int(self.topo[s].max_replicas))
        ]
        self.track_ids = o.track_ids
        # one count watch per worker: its tasks' routers share what they saw
        watch = WORKER.get(("counts_seen", self.keys.prefix), lambda: CountWatch(self.r, self.keys))
        self.view = RoutingView(self.kb, self.topo, self.td, watch)

    def _admission(self, o: SourceOptions) -> None:
        """With admission at the entry step: the worker's LAS gate and counts, the task's
        wake-ups, and each source partition's end as the task's reader last saw it."""
        self.admission: EntryGate | None = None
        self.board: WakeBoard | None = None
        self.source_ends: dict[int, int] = {}
        self.source_paused: set[int] = set()  # partitions the reader holds back
        if not self.admits:
            return
        self.admission = WORKER.get(
            ("gate", self.operator, self.keys.prefix),
            lambda: EntryGate(self.topo, self.r, self.keys, o.settings),
        )
        self.board = WakeBoard()
        self.arrivals: AdmissionCounts = WORKER.get(
            ("arrivals", self.keys.prefix),
            lambda: AdmissionCounts(
                self.producer, self.r, self.keys, o.metrics_topic, o.td,
                o.settings.arrival_grace_s,
            ),
        )  # fmt: skip

    def _open_operator(self) -> Runnable:
        return open_runnable(
            self.topo, self.operator, Context(self.operator, self.r, self.keys.prefix)
        )

    def routers(self, slot: int) -> Routers:
        """A slot's routers: the task's slots choose at once from one snapshot, taken
        again every ``ROUTERS_REBUILD_S`` of a long epoch."""
        return Routers(
            self.view,
            self.successors,
            concurrency=self.active,
            start=slot,
            rebuild_s=ROUTERS_REBUILD_S,
        )

    def current_active(self) -> int:
        """The operator's active count now (the task's may be an epoch old: a stateless
        resize takes effect in the running task, through the routers upstream)."""
        if self.o.settings.fixed_replicas:
            return self.active
        raw = self.r.get(self.keys.active(self.operator))
        return active_count(raw, self.op.min_replicas, self.op.max_replicas)

    def _guard(self, kind: str, o: SourceOptions, member: str | None = None) -> FailureGuard:
        """The operator's guard (``member``: a chained member's, under the member's name)."""
        op, name = self.op, member or self.operator
        guard: FailureGuard = WORKER.get(
            (kind, self.operator, name, self.keys.prefix),
            lambda: FailureGuard(name, op.on_error, o.failure_share, o.failure_window),
        )
        return guard

    def dead_letter(
        self,
        replica: int,
        msg: Any,
        failure: Failure,
        event_id: str | None = None,
        payload: bytes | None = None,
    ) -> None:
        """``payload``: what failed, when not ``msg``'s value (a fired window's result)."""
        rec = DeadLetter.of(
            f"dataplane:{self.operator}",
            self.topic,
            msg.value() if payload is None else payload,
            failure.reason,
            partition=replica,
            offset=msg.offset(),
            error_type=failure.error_type,
            traceback=failure.frames,
            event_id=event_id,
        )
        self.producer.produce(self.o.deadletter_topic, rec.encoded(), partition=0)
