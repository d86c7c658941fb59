"""A live run's result rows against the reference (``reference.py``).

- Appending queries (q0-q3): the rows equal the reference's, as multisets.
- Windowed queries (q5, q7, q8): every window that must have closed is judged, not only
  the ones the run wrote out. A window must have closed when its end plus the lateness
  is at most the largest event time in the events (the watermark once the input is
  consumed: each source partition's is the latest event time read from it); each such
  window the reference has rows for must have its rows, equal to the reference's as a
  multiset (``windows_missing``: due, and no row out). A window still open may be out
  or not; if it is out, its rows must equal the reference's too (``windows_wrong``), as
  must every window out (a window the reference has no row for is wrong). So an empty
  output fails as soon as one window is due.
- Updating queries (q4, q6): per key, the newest update (the highest ``version``) equals
  the reference's final row for that key, and no key is missing or extra.
"""

from __future__ import annotations

import collections
import json
import math
from typing import Any

from sps_nexmark.reference import reference

WINDOWED = frozenset({"q5", "q7", "q8"})
UPDATING = {"q4": "id", "q6": "seller"}  # the query -> its rows' key column
KINDS = ("bid", "newAuction", "newPerson")  # as the topologies' source.time reads them


def _key(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True)


def event_ms(event: dict[str, Any]) -> int:
    """An event's time (epoch ms): its ``dateTime``, whichever kind it is."""
    for kind in KINDS:
        if kind in event:
            return int(event[kind]["dateTime"])
    raise ValueError(f"not a Nexmark event: {sorted(event)}")


def newest(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Each key's highest-version row, without its version."""
    last: dict[Any, dict[str, Any]] = {}
    for r in rows:
        if r[key] not in last or r["version"] > last[r[key]]["version"]:
            last[r[key]] = r
    return [{k: v for k, v in r.items() if k != "version"} for r in last.values()]


def _multiset_diff(got: list[dict], want: list[dict]) -> dict[str, int]:
    g, w = collections.Counter(map(_key, got)), collections.Counter(map(_key, want))
    return {"extra": sum((g - w).values()), "missing": sum((w - g).values())}


def _windowed(
    got: list[dict], want: list[dict], watermark_ms: int | None, lateness_ms: int
) -> dict[str, Any]:
    by_got: dict[int, list[str]] = collections.defaultdict(list)
    by_want: dict[int, list[str]] = collections.defaultdict(list)
    ends: dict[int, int] = {}
    for r in got:
        by_got[r["window_start"]].append(_key(r))
    for r in want:
        by_want[r["window_start"]].append(_key(r))
        ends[r["window_start"]] = r["window_end"]
    closed_by = -math.inf if watermark_ms is None else watermark_ms - lateness_ms
    due = sorted(w for w, end in ends.items() if end <= closed_by)  # end + lateness <= wm
    missing = [w for w in due if w not in by_got]
    wrong = sorted(w for w, rows in by_got.items() if sorted(rows) != sorted(by_want[w]))
    return {
        "windows_closed": len(by_got),
        "windows_due": len(due),
        "windows_missing": len(missing),
        "first_missing": missing[:3],
        "windows_wrong": len(wrong),
        "first_wrong": wrong[:3],
    }


def compare(
    query: str, got: list[dict[str, Any]], events: list[dict], lateness_s: float = 0.0
) -> dict[str, Any]:
    """How ``got`` (a run's rows, repeats dropped) differs from the reference on
    ``events`` (the events the run sent, all consumed); ``exact`` says whether it does
    not. ``lateness_s``: what a windowed query's result waits for past its window's end
    (the lateness of its window stages together; the topologies declare none)."""
    want = reference(query, events)
    if query in WINDOWED:
        watermark = max(map(event_ms, events), default=None)
        out = _windowed(got, want, watermark, round(lateness_s * 1000))
        exact = out["windows_wrong"] == 0 and out["windows_missing"] == 0
        return {"rows": len(got), **out, "exact": exact}
    if query in UPDATING:
        final = newest(got, UPDATING[query])
        diff = _multiset_diff(final, want)
        return {"rows": len(got), "keys": len(final), "expected_keys": len(want), **diff,
                "exact": diff == {"extra": 0, "missing": 0}}  # fmt: skip
    diff = _multiset_diff(got, want)
    return {"rows": len(got), "expected": len(want), **diff,
            "exact": diff == {"extra": 0, "missing": 0}}  # fmt: skip
