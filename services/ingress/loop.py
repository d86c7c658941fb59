"""The ingress's loop: read the input topic, count arrivals per interval, gate each event
through LAS (``elastic_sps.las.gate``), route the admitted ones to the entry operators'
replicas, publish the per-interval counts. A plain confluent-kafka loop rather than a
faust agent: the gate decides thousands of events per call, and faust's per-event async
path tops out far below the 20,000 events/s this service must sustain.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer

from elastic_sps.contracts.action import DeadLetter
from elastic_sps.contracts.metrics import OperatorCounters
from elastic_sps.control.routing import Routers, RoutingView
from elastic_sps.io.arrivals import ArrivalCounts, arrival_s
from elastic_sps.io.connections import kafka_config
from elastic_sps.io.id_ledger import IdBatch
from elastic_sps.io.kafka_io import take_ready
from elastic_sps.io.knowledge_base import Keys, KnowledgeBase
from elastic_sps.io.redis_client import redis_client
from elastic_sps.io.rescale_timeline import CountWatch
from elastic_sps.io.tracked_producer import TrackedProducer
from elastic_sps.io.watermarks import Declaration
from elastic_sps.las.gate import Gate, events_of
from elastic_sps.las.moves import ingress_group
from elastic_sps.pipeline.costs import service_topology
from elastic_sps.services.ingress.declarations import SourceDeclarations
from elastic_sps.settings import IngressSettings

log = logging.getLogger("sps.ingress")


class IngressMetrics:
    """The ingress's Prometheus figures on an injected registry, and the running totals
    the /health page and the run's Redis hash show."""

    NAMES = ("received", "admitted", "shed", "dead_lettered", "unkeyed")

    def __init__(self, registry: Any) -> None:
        from prometheus_client import Counter, Gauge

        self.counters = {
            n: Counter(f"sps_ingress_{n}", f"events {n}", registry=registry) for n in self.NAMES
        }
        self.counts = dict.fromkeys(self.NAMES, 0)
        self.las = {
            "floor": Gauge(
                "sps_ingress_las_floor_seconds", "learned batch wait", registry=registry
            ),
            "multiplier": Gauge(
                "sps_ingress_las_cost_multiplier", "learned ŵ scale", registry=registry
            ),
            "wait": Gauge("sps_ingress_las_estimated_wait_seconds", "q̂ now", registry=registry),
            "infeasible": Gauge(
                "sps_ingress_las_tau_infeasible", "1: τ below the engine's floor", registry=registry
            ),
        }

    def add(self, name: str, n: int) -> None:
        self.counters[name].inc(n)
        self.counts[name] += n


class Ingress:
    """One poll of the loop is: consume → decide (LAS gate) → produce to the entry
    operators → flush → commit the input offsets (only after everything is delivered) →
    count. λ_G is counted by each record's arrival time (``arrivals.py``)."""

    def __init__(self, settings: IngressSettings, registry: Any) -> None:
        self.s = settings
        self.topo = service_topology(settings)
        self.keys = Keys(settings.key_prefix)
        self.r = redis_client(settings.redis_url)
        self.gate = Gate.configured(self.topo, self.r, self.keys, settings)
        self.metrics = IngressMetrics(registry)
        self.arrivals = ArrivalCounts(settings.td, grace_s=settings.arrival_grace_s)
        self.arrivals_lock = threading.Lock()
        self.entries = list(self.topo.successors["source"])
        self.kb = KnowledgeBase(self.r, self.keys)
        # an entry operator's count is read as the replicas' routers read theirs; a new
        # count takes effect here (its standby slots serve the new partitions); the
        # routers restart from the backlogs every 0.5 s
        view = RoutingView(self.kb, self.topo, settings.td, CountWatch(self.r, self.keys))
        self.routers = Routers(view, [e.dst for e in self.entries], rebuild_s=0.5)
        self.out = TrackedProducer(settings.kafka_bootstrap_servers, self.r, self.keys)
        self.side = Producer(kafka_config(settings.kafka_bootstrap_servers, **{"linger.ms": 5}))
        group = ingress_group(settings.key_prefix)
        self.consumer = Consumer(
            kafka_config(
                settings.kafka_bootstrap_servers,
                **{
                    "group.id": group,
                    # static membership (KIP-345): an ingress restarted on the same host
                    # takes its partitions back at once; as a new member it waited for the
                    # dead one's session to time out (SPS_KAFKA_SESSION_TIMEOUT_S) while
                    # its input piled up (bench_faults: kill -9 of the ingress)
                    "group.instance.id": f"{group}-{socket.gethostname()}",
                    "enable.auto.commit": False,
                    "auto.offset.reset": "earliest",
                    "session.timeout.ms": int(settings.kafka_session_timeout_s * 1000),
                },
            )
        )
        # the topology's source: the user's topics and record format, or sps.ingress
        self.source = self.topo.source.keyed_by(settings.key_field)
        self.input_topics = list(self.source.topics) or [settings.topics.ingress]
        self.consumer.subscribe(self.input_topics)
        # the source partitions' watermarks, declared to every entry partition
        self.declarations = SourceDeclarations(self.consumer, self.input_topics, settings.idle_s)
        self.declare_to = [
            (self.keys.topic(e.dst), j)
            for e in self.entries
            for j in range(int(self.topo[e.dst].max_replicas))
        ]
        # monotonic time of the last commit: none yet, so the first read commits at once
        # (a monotonic clock starts near boot, so 0.0 is not "long ago")
        self._committed_at = float("-inf")
        self._uncommitted = False  # records delivered since it
        self._warned_infeasible = False

    def publish_intervals(self, now: float) -> None:
        with self.arrivals_lock:
            due = self.arrivals.due(now)
        for k, counts in due:
            rec = OperatorCounters.arrivals(k, counts)
            self.side.produce(self.s.topics.metrics, rec.model_dump_json().encode())
            log.info("interval %d published %.3f s after its end", k, now - (k + 1) * self.s.td)
            self.log_las(k, counts, now)
        self.side.poll(0)

    def log_las(self, k: int, counts: dict[str, int], now: float) -> None:
        if self.gate.las is None:
            return
        las = self.gate.las_state(now)
        if las["infeasible"] and not self._warned_infeasible:
            log.warning(
                "SPS_TAU_MS=%g is below what this engine allows (every event waits ~%.0f ms "
                "for its micro-batch): shedding only the backlog beyond that wait",
                self.s.tau_ms,
                1000 * las["floor"],
            )
        self._warned_infeasible = bool(las["infeasible"])
        for name, g in self.metrics.las.items():
            g.set(las[name])
        log.info(
            "interval %d received %d shed %d LAS %s",
            k,
            counts.get("received", 0),
            counts.get("shed", 0),
            " ".join(f"{n}={v:.3f}" for n, v in las.items()),
        )

    def poll(self) -> None:
        began = time.time()
        msgs = take_ready(self.consumer, self.s.batch, self.s.poll_timeout_s)
        now = time.time()
        if len(msgs) < self.s.batch:  # nothing left waiting: all sent before ``began`` read
            with self.arrivals_lock:
                self.arrivals.caught_up(began)
        self.routers.refresh()
        self.gate.refresh()
        for m in msgs:
            if m.error() is not None:  # never dropped unlogged
                log.warning("consumer error: %s", m.error())
        msgs = [m for m in msgs if m.error() is None]
        if not msgs:
            if self.declare(self.declarations.due(now)):
                self.out.flush()
            self.commit(idle=True)
            return
        with self.arrivals_lock:  # counted on arrival: the publisher thread may close t
            for m in msgs:
                self.arrivals.add(arrival_s(m, now), "received")
        events, dead, times = events_of(self.source, msgs, now)
        self.declare(self.declarations.resumed(times))  # before their events
        self.declarations.read(times)
        d = self.gate.decide(events, now)
        self.produce(d, now)
        self.declare(self.declarations.due(now))  # after the events they cover
        self.dead_letter(dead, now)
        self.out.flush()
        if self.s.track_ids:  # delivered: each admitted id is now sent to its entry operators
            self.record_sent(d)
        self.side.flush(10)
        self._uncommitted = True
        self.commit(idle=False)
        with self.arrivals_lock:
            self.arrivals.add(now, "shed", len(d.shed))
            self.arrivals.add(now, "unkeyed", d.unkeyed)
        for name, v in (
            ("received", len(msgs)),
            ("admitted", len(d.admitted)),
            ("shed", len(d.shed)),
            ("dead_lettered", len(dead)),
            ("unkeyed", d.unkeyed),
        ):
            self.metrics.add(name, v)
        self.kb.set_ingress_counts(self.metrics.counts)

    def commit(self, idle: bool) -> None:
        """Commit the input offsets: only after every record read so far is delivered
        (``poll`` calls it after the flushes), so nothing is lost; a crash before a commit
        lands re-reads from the last one: at least once.

        Asynchronous, so the next batch is read while the broker records it (a waited
        commit is a large share of the ingress's hop). At most every ``commit_interval_s``
        while records flow, as Kafka Streams' and quix-streams' commit intervals do: a
        commit per read is a large share of the broker's requests. A quiet read commits
        what is left at once."""
        if not self._uncommitted:
            return
        now = time.monotonic()
        if idle or now - self._committed_at >= self.s.commit_interval_s:
            self.consumer.commit(asynchronous=True)
            self._committed_at, self._uncommitted = now, False

    def declare(self, declarations: list[Declaration]) -> bool:
        for d in declarations:
            body = d.encode()
            for topic, j in self.declare_to:
                self.out.produce(topic, body, partition=j)
        return bool(declarations)

    def record_sent(self, d: Any) -> None:
        batch = IdBatch(self.keys.prefix)
        for ev, _ in d.admitted:
            for e in self.entries:
                batch.add(e.dst, "sent", ev.id)
        pipe = self.r.pipeline(transaction=False)
        batch.write(pipe)
        pipe.execute()

    def produce(self, d: Any, now: float) -> None:
        for ev, key in d.admitted:
            body = ev.encode()  # once, whatever the number of entry operators
            for e in self.entries:
                self.out.produce(
                    self.keys.topic(e.dst),
                    body,
                    partition=self.routers.choose(e.dst, ev.payload),
                    key=key,
                )
        if self.s.write_shed:
            for raw in d.shed:
                self.side.produce(self.s.topics.shed, raw)

    def dead_letter(self, dead: list[tuple[bytes, str]], now: float) -> None:
        for raw, reason in dead:
            rec = DeadLetter.of("ingress", ",".join(self.input_topics), raw, reason, at=now)
            self.side.produce(self.s.topics.deadletter, rec.encoded())

    def publish_on_time(self, stop: threading.Event) -> None:
        """λ_G(t) leaves as soon as t is over (plus grace), whatever the poll loop is
        waiting on (a flush, a commit): the monitor closes t one grace period later."""
        while not stop.wait(0.05):
            self.publish_intervals(time.time())

    def close(self) -> None:
        # everything still open, the current interval included
        self.publish_intervals(time.time() + self.s.td + self.arrivals.max_wait_s + 1)
        self.side.flush(10)
        with contextlib.suppress(KafkaException):  # nothing new to commit
            self.consumer.commit(asynchronous=False)
        self.consumer.close()
