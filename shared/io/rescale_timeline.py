"""The rescale timeline: for every applied change of an operator's active count, the time
from the decision to its effect and to recovery (the figure users compare with a Flink
job's restart).

* **decided**: the plan service made the plan (``PlanRecord.decided_at``);
* **applied**: execute wrote the new count, and in the same Lua script the operator's
  marker ``Keys.rescale`` (``elastic_sps.services.execute.core``);
* **effect**: the dataplane planned the first micro-batch with the new count
  (``record_effect``, called by the stream reader as it plans a batch); the marker gets
  ``effect_at`` once (HSETNX, so a restarted reader does not count it twice) and the
  change is appended to ``Keys.rescale_log``;
* **recovered**: the end of the first interval, from the effect on, in which the operator
  processed at least 90 % of what it received (``with_recovery``, from ``sps.stats``):
  its throughput is back within 10 % of its input.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from elastic_sps.io.knowledge_base import Keys

LOG_KEPT = 10_000  # newest changes kept in the log: one run's worth, bounded
RECOVERED_SHARE = 0.9  # processed / received for the throughput to count as recovered


@dataclass(frozen=True)
class Rescale:
    operator: str
    plan_id: str
    before: int
    after: int
    decided_at: float
    applied_at: float
    effect_at: float
    recovered_at: float | None = None

    @property
    def decision_to_effect_s(self) -> float:
        return max(0.0, self.effect_at - self.decided_at)

    @property
    def decision_to_recovery_s(self) -> float | None:
        return None if self.recovered_at is None else max(0.0, self.recovered_at - self.decided_at)


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def record_effect(r: Any, keys: Keys, operator: str, active: int, now: float) -> Rescale | None:
    """The batch being planned runs ``active`` replicas of ``operator``: if that is the
    count of the operator's last change and its effect is not recorded yet, record it."""
    marker = {_text(k): _text(v) for k, v in r.hgetall(keys.rescale(operator)).items()}
    if not marker or int(marker["to"]) != active or "effect_at" in marker:
        return None
    if not r.hsetnx(keys.rescale(operator), "effect_at", repr(now)):
        return None  # another reader recorded it first
    decided = float(marker["decided_at"]) or float(marker["applied_at"])
    change = Rescale(
        operator,
        marker["plan_id"],
        int(marker["from"]),
        active,
        decided,
        float(marker["applied_at"]),
        now,
    )
    pipe = r.pipeline(transaction=False)
    pipe.rpush(keys.rescale_log, json.dumps(asdict(change)))
    pipe.ltrim(keys.rescale_log, -LOG_KEPT, -1)
    # The /metrics histogram, counted as changes happen: a scrape reads one hash instead
    # of the whole log, and the counts go on past the log's LOG_KEPT.
    buckets, total = histogram([change])
    for label, count in buckets:
        if count:
            pipe.hincrby(keys.rescale_histogram, label, 1)
    pipe.hincrbyfloat(keys.rescale_histogram, "sum", total)
    pipe.execute()
    return change


@dataclass
class CountWatch:
    """The active counts a router last routed with (the ingress's, a dataplane worker's).
    A count that differs from the last one seen is a change taking effect now: the router
    sends to the new replicas from here on, so it is recorded (``record_effect``). The
    first count seen is not a change; the stream reader records that one."""

    r: Any
    keys: Keys
    seen: dict[str, int] = field(default_factory=dict)

    def see(self, operator: str, active: int) -> bool:
        """True when ``active`` is a change from the last count seen for ``operator``."""
        changed = self.seen.get(operator, active) != active
        if changed:
            record_effect(self.r, self.keys, operator, active, time.time())
        self.seen[operator] = active
        return changed


def read(r: Any, keys: Keys) -> list[Rescale]:
    return [Rescale(**json.loads(x)) for x in r.lrange(keys.rescale_log, 0, -1)]


def with_recovery(changes: Iterable[Rescale], stats: Sequence[Mapping[str, Any]]) -> list[Rescale]:
    """Each change with the end of the first interval (``sps.stats``, interval k covers
    [k·td, (k+1)·td)) from its effect on in which the operator processed ≥ 90 % of what
    it received; None if that never happened in ``stats``."""
    rows = sorted(stats, key=lambda s: s["interval"])
    out = []
    for c in changes:
        recovered = None
        for s in rows:
            td = float(s["td"])
            end = (s["interval"] + 1) * td
            op = s["operators"].get(c.operator)
            if end <= c.effect_at or op is None:
                continue
            if op["processed"] >= RECOVERED_SHARE * op["received"]:
                recovered = end
                break
        out.append(replace(c, recovered_at=recovered))
    return out


def _quantiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "p99": None}
    return {
        "median": round(float(np.median(values)), 3),
        "p99": round(float(np.percentile(values, 99)), 3),
    }


def summary(changes: Sequence[Rescale]) -> dict[str, Any]:
    """The report's figures: how many changes, decision->effect and ->recovery seconds."""
    effect = [c.decision_to_effect_s for c in changes]
    recovery = [c.decision_to_recovery_s for c in changes if c.decision_to_recovery_s is not None]
    return {
        "changes": len(changes),
        "decision_to_effect_s": _quantiles(effect),
        "decision_to_recovery_s": _quantiles(recovery),
        "not_recovered": sum(1 for c in changes if c.recovered_at is None),
    }


EFFECT_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, math.inf)


def read_histogram(r: Any, keys: Keys) -> tuple[list[tuple[str, float]], float]:
    """The histogram ``record_effect`` keeps in Redis, as ``histogram`` returns it."""
    raw = {_text(k): float(v) for k, v in r.hgetall(keys.rescale_histogram).items()}
    buckets, _ = histogram([])
    return [(label, raw.get(label, 0.0)) for label, _ in buckets], raw.get("sum", 0.0)


def histogram(changes: Sequence[Rescale]) -> tuple[list[tuple[str, float]], float]:
    """Cumulative bucket counts of decision->effect seconds, and their sum (Prometheus)."""
    values = [c.decision_to_effect_s for c in changes]
    buckets = [
        ("+Inf" if math.isinf(le) else str(le), float(sum(v <= le for v in values)))
        for le in EFFECT_BUCKETS
    ]
    return buckets, float(sum(values))
