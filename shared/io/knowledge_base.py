"""The knowledge base (the K of MAPE-K): every Redis key of the ensemble, and every read and
write of its shared state, each with one meaning and one default.

Every key lives under one configurable prefix, and this module is the only place that
spells them (a test greps the rest of the code for key strings), so a service written by
someone else finds the same keys. It is the realizer interface of the MAPE loop, as
``ScalingRealizer`` is in flink-autoscaler: Execute writes the counts through it, the
dataplane and the ingress read them through it.

| key                                   | type   | written by          | read by                |
|---------------------------------------|--------|---------------------|------------------------|
| {p}:op:{op}:active                    | int    | execute             | dataplane, ingress     |
| {p}:op:{op}:pool                      | int    | execute (at start)  | dataplane, plan        |
| {p}:op:{op}:et_ms                     | float  | execute (benchmark) | analyze, dataplane     |
| {p}:op:{op}:util                      | hash   | dataplane           | /metrics, reports      |
| {p}:op:{op}:rescale                   | hash   | execute, dataplane  | dataplane (timeline)   |
| {p}:ends:{topic}                      | hash   | every producer      | routers, dataplane     |
| {p}:dp:{op}:committed                 | hash   | dataplane tasks     | routers, dataplane     |
| {p}:dp:{op}:counts                    | hash   | dataplane tasks     | dataplane /metrics     |
| {p}:dp:{op}:batches / tasks           | list   | dataplane           | benchmarks, tests      |
| {p}:dp:{op}:executors                 | hash   | dataplane tasks     | tests (cluster spread) |
| {p}:dp:runs                           | list   | dataplane driver    | readiness, tests       |
| {p}:dp:rescales (+ :histogram)        | list   | dataplane           | reports, /metrics      |
| {p}:costs                             | hash   | dataplane (measure) | every service          |
| {p}:ingress:counts                    | hash   | ingress             | demo report            |
| {p}:ingress:group                     | string | ingress (first run) | ingress                |
| {p}:ids:{op}:{kind}                   | set    | ingress, dataplane  | reports (id ledger)    |
| {p}:plan:last_interval                | int    | execute             | execute (ordering)     |
| {p}:plan:short                        | string | execute             | ingress (LAS gate)     |
| {p}:plan:applied                      | set    | execute             | execute                |
| {p}:heartbeat:{service}               | float  | every service       | `elastic-sps up`       |
| {p}:state:{op}:{group}                | hash   | keyed replicas      | keyed replicas         |
| {p}:win:{op}:{group}, winends         | hash   | window replicas     | window replicas        |
| {p}:wm:{op}:{partition}               | hash   | every replica       | the same partition     |
| {p}:dp:{op}:epoch, {p}:applied:{op}:* | hash   | keyed replicas      | keyed replicas (fence) |
| {p}:las:{op}:sketch                   | hash   | dataplane operator  | ingress shedder        |
| {p}:las:{op}:deltas                   | list   | dataplane operator  | ingress shedder        |
| {p}:admission:site                    | string | the first resolver  | dataplane, ingress, up |
| {p}:admission:moving                  | string | a site move's mover | the other resolvers    |
| {p}:dp:serving_holders                | set    | dataplane tasks     | dataplane /health      |
| {p}:dp:stopping:{holder}              | string | dataplane driver    | its source, its tasks  |
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

LOG_KEPT = 1000  # entries kept in the batch and task logs


@dataclass(frozen=True)
class Keys:
    prefix: str = "sps"

    def topic(self, op: str) -> str:
        """The operator's Kafka topic in this run's namespace."""
        from elastic_sps.io.topics import Topics

        return Topics.operator(op, self.prefix)

    def active(self, op: str) -> str:
        return f"{self.prefix}:op:{op}:active"

    def pool(self, op: str) -> str:
        return f"{self.prefix}:op:{op}:pool"

    def et_ms(self, op: str) -> str:
        return f"{self.prefix}:op:{op}:et_ms"

    @property
    def dataplane_lease(self) -> str:
        """Which dataplane process runs the queries (``services/dataplane/lease.py``)."""
        return f"{self.prefix}:dp:lease"

    @property
    def dataplane_serving(self) -> str:
        """The lease holder whose queries have finished a batch since it took the lease."""
        return f"{self.prefix}:dp:serving"

    @property
    def admission_site(self) -> str:
        """Where LAS admits (``las.site``): recorded by the first service to decide, so
        that every later start of any service decides the same under ``admission: auto``,
        and one naming the other site moves the deployment (``las.moves``)."""
        return f"{self.prefix}:admission:site"

    @property
    def admission_move(self) -> str:
        """Held (with an expiry) by the service carrying the source's read positions
        from one admission site to the other (``las.moves``)."""
        return f"{self.prefix}:admission:moving"

    @property
    def tasks_serving(self) -> str:
        """The dataplane processes (their lease ids, a set) whose tasks have served the
        replicas: added as a task past the warm-up batch starts serving (a set, so that
        an old holder's late task cannot take a new holder's mark away)."""
        return f"{self.prefix}:dp:serving_holders"

    def overlap(self, op: str, partition: int) -> str:
        """Who serves ``op``'s ``partition`` past its task's epoch (``holder|token``, with
        an expiry): the next task for it takes over from there
        (``services/dataplane/overlap.py``)."""
        return f"{self.prefix}:dp:overlap:{op}:{partition}"

    def overlap_claim(self, batch: str, group: int) -> str:
        """Which task (its index in the batch) serves a batch's ``group`` of an operator's
        slots, when windows overlap: a task takes the group whose window its worker
        still serves (``overlap.claim``)."""
        return f"{self.prefix}:dp:claim:{batch}:{group}"

    @property
    def overlaps(self) -> str:
        """The pattern every ``overlap`` record of the deployment matches."""
        return f"{self.prefix}:dp:overlap:*"

    def overlap_end(self, token: str) -> str:
        """Set by a task that needs the partitions of the window ``token`` served: it
        ends and commits."""
        return f"{self.prefix}:dp:overlap_end:{token}"

    def dataplane_stopping(self, holder: str) -> str:
        """Set by a lease holder stopping gracefully: its source plans no further batch
        and its tasks end their epochs at once (``services/dataplane/stopping.py``)."""
        return f"{self.prefix}:dp:stopping:{holder}"

    def committed(self, op: str) -> str:
        """Hash partition -> offset up to which the operator's replicas have processed."""
        return f"{self.prefix}:dp:{op}:committed"

    def position(self, op: str) -> str:
        """Hash partition -> offset up to which the operator's replicas have served, not
        yet committed: a queue level for the monitor, never a place to resume from."""
        return f"{self.prefix}:dp:{op}:position"

    def arrivals_read(self, op: str) -> str:
        """Hash source partition -> the offset up to which an entry operator's readers
        have counted arrivals (admission at the entry step: λ_G counts each record once,
        though a record read as an epoch ends is read again by the next)."""
        return f"{self.prefix}:dp:{op}:arrivals"

    def ends(self, topic: str) -> str:
        """Hash partition -> the true end its producers recorded (``tracked_producer``)."""
        return f"{self.prefix}:ends:{topic}"

    def counts(self, op: str) -> str:
        """Hash of events the operator processed, expired and dead-lettered."""
        return f"{self.prefix}:dp:{op}:counts"

    def batches(self, op: str) -> str:
        """The stream reader's plan of each micro-batch (JSON), newest last."""
        return f"{self.prefix}:dp:{op}:batches"

    def tasks(self, op: str) -> str:
        """Each task's span: ``start end backlog``, newest last."""
        return f"{self.prefix}:dp:{op}:tasks"

    def executors(self, op: str) -> str:
        """Hash executor id -> slot groups it served."""
        return f"{self.prefix}:dp:{op}:executors"

    @property
    def runs(self) -> str:
        """The dataplane's streaming query run ids, one entry per start."""
        return f"{self.prefix}:dp:runs"

    @property
    def costs(self) -> str:
        """Hash operator -> [et_ms, cpu_share] as the dataplane measured them."""
        return f"{self.prefix}:costs"

    @property
    def ingress_counts(self) -> str:
        return f"{self.prefix}:ingress:counts"

    @property
    def ingress_group(self) -> str:
        """The ingress's consumer group, recorded at the deployment's first ingress start
        since groups are per deployment: recorded, nothing is taken from the shared one
        (``las.moves.adopt_shared_offsets``)."""
        return f"{self.prefix}:ingress:group"

    def ids(self, op: str, kind: str) -> str:
        """The id ledger's set of ids ``op`` saw as ``kind`` (``id_ledger``)."""
        return f"{self.prefix}:ids:{op}:{kind}"

    def rescale(self, op: str) -> str:
        """The operator's last change of count: plan, from, to, decided/applied/effect."""
        return f"{self.prefix}:op:{op}:rescale"

    @property
    def rescale_log(self) -> str:
        """Every change that took effect, oldest first (elastic_sps.io.rescale_timeline)."""
        return f"{self.prefix}:dp:rescales"

    @property
    def rescale_histogram(self) -> str:
        """Decision -> effect seconds of every change: cumulative bucket counts and sum."""
        return f"{self.prefix}:dp:rescales:histogram"

    def utilisation(self, op: str) -> str:
        return f"{self.prefix}:op:{op}:util"

    @property
    def last_plan(self) -> str:
        """The newest interval whose plan was applied."""
        return f"{self.prefix}:plan:last_interval"

    @property
    def plan_short(self) -> str:
        """The last periodic plan's short operators, comma-separated ("" if none)."""
        return f"{self.prefix}:plan:short"

    @property
    def applied_plans(self) -> str:
        return f"{self.prefix}:plan:applied"

    def heartbeat(self, service: str) -> str:
        return f"{self.prefix}:heartbeat:{service}"

    def state(self, op: str, group: int) -> str:
        """A keyed operator's state of one key group: hash key -> JSON value."""
        return f"{self.prefix}:state:{op}:{group}"

    def member_state(self, op: str, member: str, group: int) -> str:
        """A keyed chain ``op``'s keyed member's state of one key group, beside its head's."""
        return f"{self.prefix}:state:{op}>{member}:{group}"

    def windows(self, op: str, group: int) -> str:
        """A window operator's open windows of one key group: hash -> JSON accumulator."""
        return f"{self.prefix}:win:{op}:{group}"

    def window_ends(self, op: str, partition: int) -> str:
        """The open windows of one partition by end: zset [group, field] -> end."""
        return f"{self.prefix}:winends:{op}:{partition}"

    def watermarks(self, op: str, partition: int) -> str:
        """One partition's watermark ("@") and its inputs' declarations: hash input ->
        watermark, input + "#" -> "idle of" (``elastic_sps.io.watermarks``)."""
        return f"{self.prefix}:wm:{op}:{partition}"

    def epochs(self, op: str) -> str:
        """Hash partition -> how many times a keyed partition committed (the fence)."""
        return f"{self.prefix}:dp:{op}:epoch"

    def applied(self, op: str, partition: int) -> str:
        """Zset event id -> commit time: the ids a keyed partition applied lately."""
        return f"{self.prefix}:applied:{op}:{partition}"

    @property
    def moves(self) -> str:
        return f"{self.prefix}:dp:moves"

    def pauses(self, op: str) -> str:
        """A keyed operator's moved partitions: how long each one's events waited."""
        return f"{self.prefix}:dp:{op}:pauses"

    def handover(self, op: str) -> str:
        """Hash partition -> "owner commit-time" of a keyed operator's last commit."""
        return f"{self.prefix}:dp:{op}:handover"

    def las_sketch(self, op: str) -> str:
        return f"{self.prefix}:las:{op}:sketch"

    def las_deltas(self, op: str) -> str:
        return f"{self.prefix}:las:{op}:deltas"


class Bounded(Protocol):
    """What the knowledge base needs of an operator to default its count."""

    @property
    def name(self) -> str: ...
    @property
    def min_replicas(self) -> int: ...
    @property
    def max_replicas(self) -> int: ...


def active_count(value: bytes | str | int | None, lo: int, hi: int) -> int:
    """An operator's active replicas from its stored value: unset (execute has not written
    it yet) means its minimum ``lo``; always within [1, ``hi``]."""
    n = int(value or 0) or lo
    return max(1, min(hi, n))


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _int_hash(raw: Mapping[Any, Any]) -> dict[int, int]:
    return {int(k): int(v) for k, v in raw.items()}


class KnowledgeBase:
    """Typed reads and writes of the shared state. ``pipe`` arguments take a Redis
    pipeline, so a caller batches several writes in one round trip."""

    def __init__(self, redis: Any, keys: Keys | str = "sps") -> None:
        self.r = redis
        self.keys = keys if isinstance(keys, Keys) else Keys(keys)

    # -- replica counts: written by execute, read by everything else -----------------------
    def active(self, op: Bounded) -> int:
        return active_count(self.r.get(self.keys.active(op.name)), op.min_replicas, op.max_replicas)

    def actives(self, ops: Iterable[Bounded]) -> dict[str, int]:
        ops = list(ops)
        if not ops:
            return {}
        values = self.r.mget([self.keys.active(op.name) for op in ops])
        return {
            op.name: active_count(v, op.min_replicas, op.max_replicas)
            for op, v in zip(ops, values, strict=True)
        }

    def bootstrap(self, ops: Iterable[Any]) -> None:
        """Pools and benchmarked et as declared, and each count at its minimum unless
        one is already set (a restarted execute keeps the running counts)."""
        pipe = self.r.pipeline()
        for op in ops:
            pipe.set(self.keys.pool(op.name), op.max_replicas)
            pipe.set(self.keys.et_ms(op.name), op.et_ms)
            pipe.setnx(self.keys.active(op.name), max(1, op.min_replicas))
        pipe.execute()

    def et_ms(self, op: str) -> float | None:
        v = self.r.get(self.keys.et_ms(op))
        return float(v) if v is not None else None

    # -- the routers' view: partition ends, progress, backlogs ----------------------------
    def ends(self, topic: str, partitions: int) -> list[int]:
        return self.ends_many({topic: partitions})[topic]

    def ends_many(self, topics: Mapping[str, int]) -> dict[str, list[int]]:
        """Several topics' ends (topic -> partitions) in one round trip."""
        pipe = self.r.pipeline(transaction=False)
        for t in topics:
            pipe.hgetall(self.keys.ends(t))
        out = {}
        for (t, n), raw in zip(topics.items(), pipe.execute(), strict=True):
            ends = [0] * n
            for j, end in _int_hash(raw).items():
                if j < n:
                    ends[j] = end
            out[t] = ends
        return out

    def committed(self, ops: Iterable[str]) -> dict[str, dict[int, int]]:
        """How far each partition of each operator was processed."""
        ops = list(ops)
        pipe = self.r.pipeline(transaction=False)
        for op in ops:
            pipe.hgetall(self.keys.committed(op))
        return {op: _int_hash(raw) for op, raw in zip(ops, pipe.execute(), strict=True)}

    def record_position(self, op: str, served: Mapping[int, int]) -> None:
        self.r.hset(self.keys.position(op), mapping={str(j): v for j, v in served.items()})

    def record_committed(self, pipe: Any, op: str, done: Mapping[int, int]) -> None:
        # one task per partition per batch, batches in order: a plain HSET
        pipe.hset(self.keys.committed(op), mapping={str(j): v for j, v in done.items()})

    def backlog(self, op: str, partitions: int, ends: Sequence[int] | None = None) -> list[int]:
        """Events waiting per partition of an operator: recorded end (or ``ends``, e.g.
        the broker's) − committed offset."""
        pipe = self.r.pipeline(transaction=False)
        pipe.hgetall(self.keys.ends(self.keys.topic(op)))
        pipe.hgetall(self.keys.committed(op))
        recorded, done = (_int_hash(x) for x in pipe.execute())
        at = dict(enumerate(ends)) if ends is not None else recorded
        return [max(0, at.get(j, 0) - done.get(j, 0)) for j in range(partitions)]

    def record_utilisation(self, pipe: Any, op: str, replica: int, share: float) -> None:
        pipe.hset(self.keys.utilisation(op), str(replica), share)

    # -- published counts ------------------------------------------------------------------
    def add_counts(self, pipe: Any, op: str, totals: Mapping[str, int]) -> None:
        for name, n in totals.items():
            if n:
                pipe.hincrby(self.keys.counts(op), name, n)

    def counts(self, op: str) -> dict[str, int]:
        return {_text(k): int(v) for k, v in self.r.hgetall(self.keys.counts(op)).items()}

    def keys_with_state(self, op: str, key_groups: int) -> int:
        """How many keys hold ``ctx.state`` of keyed operator ``op`` (a keyed chain's
        members' states apart: only its head's)."""
        pipe = self.r.pipeline(transaction=False)
        for group in range(key_groups):
            pipe.hlen(self.keys.state(op, group))
        return int(sum(pipe.execute()))

    def set_ingress_counts(self, counts: Mapping[str, int]) -> None:
        self.r.hset(self.keys.ingress_counts, mapping=dict(counts))

    def ingress_counts(self) -> dict[str, int]:
        raw = self.r.hgetall(self.keys.ingress_counts)
        return {_text(k): int(float(v)) for k, v in raw.items()}

    # -- the dataplane's own logs ----------------------------------------------------------
    def log_batch(self, pipe: Any, op: str, entry: Mapping[str, Any]) -> None:
        pipe.rpush(self.keys.batches(op), json.dumps(entry))
        pipe.ltrim(self.keys.batches(op), -LOG_KEPT, -1)

    def batches(self, op: str, start: int = 0) -> list[dict[str, Any]]:
        return [json.loads(b) for b in self.r.lrange(self.keys.batches(op), start, -1)]

    def batch_count(self, op: str) -> int:
        return int(self.r.llen(self.keys.batches(op)))

    def log_task(self, pipe: Any, op: str, start: float, end: float, backlog: int) -> None:
        pipe.rpush(self.keys.tasks(op), f"{start:.3f} {end:.3f} {backlog}")
        pipe.ltrim(self.keys.tasks(op), -LOG_KEPT, -1)

    def tasks(self, op: str) -> list[tuple[float, float, int]]:
        out = []
        for line in self.r.lrange(self.keys.tasks(op), 0, -1):
            start, end, backlog = _text(line).split()
            out.append((float(start), float(end), int(backlog)))
        return out

    def count_executor(self, pipe: Any, op: str, executor: str) -> None:
        pipe.hincrby(self.keys.executors(op), executor, 1)

    def executors(self, op: str) -> set[str]:
        return {_text(e) for e in self.r.hkeys(self.keys.executors(op))}

    def record_run(self, run_ids: Mapping[str, str]) -> None:
        self.r.rpush(self.keys.runs, json.dumps(dict(run_ids)))

    def runs(self) -> int:
        """How many times the dataplane's queries started (0: not running yet)."""
        return int(self.r.llen(self.keys.runs))

    # -- keyed operators' moves ------------------------------------------------------------
    def record_pause(self, op: str, partition: int, pause_s: float, moved: bool, at: float) -> None:
        """How long a partition's events waited from its last commit to its next task's
        first event (``moved``: it changed owner in between)."""
        entry = {"partition": partition, "pause_s": round(pause_s, 4), "moved": moved, "at": at}
        pipe = self.r.pipeline(transaction=False)
        pipe.rpush(self.keys.pauses(op), json.dumps(entry))
        pipe.ltrim(self.keys.pauses(op), -10 * LOG_KEPT, -1)
        pipe.execute()

    def record_move(
        self, op: str, before: int, after: int, partitions: list[int], groups: int,
        size: int, at: float,
    ) -> None:  # fmt: skip
        entry = {
            "operator": op, "from": before, "to": after, "partitions": partitions,
            "key_groups": groups, "state_bytes": size, "at": at,
        }  # fmt: skip
        self.r.rpush(self.keys.moves, json.dumps(entry))

    def moves(self) -> list[dict[str, Any]]:
        """Every keyed resize that took effect: partitions, key groups, bytes of state."""
        return [json.loads(x) for x in self.r.lrange(self.keys.moves, 0, -1)]

    def pauses(self, op: str) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.r.lrange(self.keys.pauses(op), 0, -1)]

    # -- measured costs --------------------------------------------------------------------
    def publish_costs(self, costs: Mapping[str, tuple[float, float | None]]) -> None:
        self.r.hset(self.keys.costs, mapping={n: json.dumps(list(c)) for n, c in costs.items()})

    def costs(self) -> dict[str, tuple[float, float | None]]:
        raw = self.r.hgetall(self.keys.costs)
        return {_text(k): tuple(json.loads(v)) for k, v in raw.items()}
