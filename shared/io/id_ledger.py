"""End-to-end accounting by event id, per stage (issue: reliability).

Every admitted event must end as exactly one of completed, expired, shed or
dead-lettered. Counters cannot show that: a loss between two later operators is invisible
in the entry operator's arithmetic, and a duplicate from an at-least-once replay can hide
a loss. So, when tracking is on, each stage records ids in Redis sets, one per run
(namespaced by the run's key prefix, expiring after ``TTL_S``):

* ``{prefix}:ids:{op}:sent``: ids sent to ``op`` (by the ingress for an entry operator,
  by each predecessor for the others; a filter that emits nothing sends nothing);
* ``{prefix}:ids:{op}:processed`` / ``expired`` / ``dead``: what ``op`` did with them;
* ``{prefix}:ids:{op}:members_dead``: inputs of a chain's members after its head that
  failed there (dead-lettered with their own ids): the event that entered the chain is
  resolved as processed, so these are beside the stage's fates, not among them;
* ``{prefix}:ids:{op}:incomplete``: the chain's events (among ``processed``) one of whose
  members failed: at a sink chain, events whose outputs did not all arrive.

An operator's *lost* ids are those sent to it and never processed, expired or
dead-lettered there; its *duplicates* are the processings beyond one per id. Sets (not
HyperLogLogs) because a loss of one event must show; their cost is measured in the README
(about 60 bytes an id and stage). Members are written in one pipeline per batch.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from elastic_sps.io.knowledge_base import Keys

KINDS = ("sent", "processed", "expired", "dead", "late", "members_dead", "incomplete")
TTL_S = 7 * 24 * 3600  # a run's ledger outlives its report by a week, then Redis drops it


def key(prefix: str, operator: str, kind: str) -> str:
    return Keys(prefix).ids(operator, kind)


@dataclass
class IdBatch:
    """The ids one batch (an ingress poll, a replica slot) adds to the ledger."""

    prefix: str
    ids: dict[tuple[str, str], list[str]] = field(default_factory=lambda: defaultdict(list))

    def add(self, operator: str, kind: str, event_id: str) -> None:
        self.ids[(operator, kind)].append(event_id)

    def write(self, pipe: Any) -> None:
        """Queue the SADDs (and their expiry) on a Redis pipeline the caller executes."""
        for (op, kind), ids in self.ids.items():
            if ids:
                k = key(self.prefix, op, kind)
                pipe.sadd(k, *ids)
                pipe.expire(k, TTL_S)
        self.ids.clear()


@dataclass(frozen=True)
class StageAccount:
    operator: str
    sent: int
    processed: int  # distinct ids
    expired: int
    dead: int
    late: int  # reached a window operator after its window closed (dead-lettered too)
    lost: int  # sent here, and neither processed, expired, dead-lettered nor late here
    members_dead: int = 0  # a chain's members' own failed inputs (its events processed)
    incomplete: int = 0  # a sink chain's processed events one of whose members failed

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def stage_accounts(redis: Any, prefix: str, operators: Iterable[str]) -> list[StageAccount]:
    """Each operator's ledger, read after the run has drained."""
    out = []
    for op in operators:
        k = {kind: key(prefix, op, kind) for kind in KINDS}
        resolved = key(prefix, op, "resolved")
        pipe = redis.pipeline(transaction=False)
        for kind in KINDS:
            pipe.scard(k[kind])
        pipe.sunionstore(resolved, [k["processed"], k["expired"], k["dead"], k["late"]])
        pipe.sdiff([k["sent"], resolved])
        pipe.delete(resolved)
        sent, processed, expired, dead, late, members_dead, incomplete, _, missing, _ = (
            pipe.execute()
        )
        out.append(
            StageAccount(
                op, sent, processed, expired, dead, late, len(missing), members_dead, incomplete
            )
        )
    return out


def completed_count(redis: Any, prefix: str, sinks: Iterable[str]) -> int:
    """How many sink events completed: distinct ids per sink, summed (an event's outputs
    carry distinct ids, ``operators.with_ids``; a replayed one counts once), less a sink
    chain's events one of whose members failed (``incomplete``: not all of their outputs
    reached the sink's topic, though the chain processed them)."""
    pipe = redis.pipeline(transaction=False)
    for s in sinks:
        pipe.scard(key(prefix, s, "processed"))
        pipe.scard(key(prefix, s, "incomplete"))
    replies = pipe.execute()
    return int(sum(replies[0::2]) - sum(replies[1::2]))


def completed_ids(redis: Any, prefix: str, sinks: Iterable[str]) -> set[str]:
    """Distinct ids that reached a sink (completed however often they were replayed; as
    ``completed_count``, not a sink chain's incomplete events)."""
    out: set[str] = set()
    for s in sinks:
        done = redis.sdiff([key(prefix, s, "processed"), key(prefix, s, "incomplete")])
        out |= {m.decode() if isinstance(m, bytes) else m for m in done}
    return out
