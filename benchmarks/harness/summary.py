"""What a run's row says and how the runs are summed up, the same for every benchmark that
compares engines: latency percentiles, CPU per event by process role, and min/median/max
per engine (and query) over the runs, a failed run said, not counted."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np


def latency_cells(ms: Sequence[float]) -> dict[str, float]:
    """p50 and p99 of per-event (or per-row) latencies in ms, to 0.1 ms."""
    lat = np.asarray(ms, dtype=float)
    return {
        "p50_ms": round(float(np.percentile(lat, 50)), 1),
        "p99_ms": round(float(np.percentile(lat, 99)), 1),
    }


def cpu_cells(used: dict[str, float], events: int) -> dict[str, Any]:
    """CPU ms per event of every process of the run (``used``: CPU seconds by role; the
    broker and redis-server included, since an engine that makes more hops makes the
    broker work more; "bench" is the feed and the collector), and by role."""
    return {
        "cpu_ms_per_event": round(1000 * sum(used.values()) / events, 4),
        "cpu_ms_per_event_by_role": {
            k: round(1000 * v / events, 4) for k, v in sorted(used.items())
        },
    }


def idle_cells(used: dict[str, float], seconds: float) -> dict[str, Any]:
    """What the running engine spends with no input (``used``: CPU seconds by role over
    ``seconds`` of wall time), in cores: its pollers, timers and JVMs, which a figure per
    event also counts while it waits (for windows to close, for the next event). None
    measured (0 seconds): no cells."""
    if seconds <= 0:
        return {}
    return {
        "idle_cores": round(sum(used.values()) / seconds, 4),
        "idle_cores_by_role": {k: round(v / seconds, 4) for k, v in sorted(used.items())},
    }


def spread(values: Sequence[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def summary(
    rows: Sequence[dict[str, Any]],
    by: Sequence[str],
    metrics: Sequence[str],
    all_of: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Per group of ``by`` values (in first-seen order): its runs, whether ``all_of``
    held in every run, and each metric's min/median/max over the runs that have it. Rows
    with an ``error`` are left out; a group with no other row has no line."""
    out = []
    for group in dict.fromkeys(tuple(r[k] for k in by) for r in rows):
        mine = [r for r in rows if tuple(r[k] for k in by) == group and "error" not in r]
        if not mine:
            continue
        line: dict[str, Any] = {**dict(zip(by, group, strict=True)), "runs": len(mine)}
        line |= {k: all(r[k] for r in mine) for k in all_of}
        for key in metrics:
            values = [r[key] for r in mine if r[key] is not None]
            if values:
                line[key] = spread(values)
        out.append(line)
    return out


def lines(summed: Iterable[dict[str, Any]]) -> list[str]:
    """The summary as text: each group's labels, then each metric's min/median/max."""
    out = []
    for s in summed:
        labels = [f"{v}" if k != "peer" else f"{v:<16}" for k, v in s.items()
                  if k != "runs" and not isinstance(v, (dict, bool))]  # fmt: skip
        flags = [f"{k}={v}" for k, v in s.items() if isinstance(v, bool)]
        cells = [f"{k} {v['min']}/{v['median']}/{v['max']}" for k, v in s.items()
                 if isinstance(v, dict)]  # fmt: skip
        out.append(" ".join([*labels, *flags]) + " " + "  ".join(cells) + "  (min/median/max)")
    return out
