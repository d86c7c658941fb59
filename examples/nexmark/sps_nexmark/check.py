"""A live run's result rows against the reference (``reference.py``).

- Appending queries (q0-q3): the rows equal the reference's, as multisets.
- Windowed queries (q5, q7, q8): every window the run output a row for is closed; its
  rows equal the reference's rows for that window, as multisets. Windows still open at
  the end of a run have no rows and are not judged.
- Updating queries (q4, q6): per key, the newest update (the highest ``version``) equals
  the reference's final row for that key, and no key is missing or extra.
"""

from __future__ import annotations

import collections
import json
from typing import Any

from sps_nexmark.reference import reference

WINDOWED = frozenset({"q5", "q7", "q8"})
UPDATING = {"q4": "id", "q6": "seller"}  # the query -> its rows' key column


def _key(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True)


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


def _windowed(got: list[dict], want: list[dict]) -> dict[str, Any]:
    by_got: dict[int, list[str]] = collections.defaultdict(list)
    by_want: dict[int, list[str]] = collections.defaultdict(list)
    for r in got:
        by_got[r["window_start"]].append(_key(r))
    for r in want:
        by_want[r["window_start"]].append(_key(r))
    wrong = sorted(w for w, rows in by_got.items() if sorted(rows) != sorted(by_want[w]))
    return {"windows_closed": len(by_got), "windows_wrong": len(wrong), "first_wrong": wrong[:3]}


def compare(query: str, got: list[dict[str, Any]], events: list[dict]) -> dict[str, Any]:
    """How ``got`` (a run's rows, repeats dropped) differs from the reference on
    ``events`` (the events the run sent); ``exact`` says whether it does not."""
    want = reference(query, events)
    if query in WINDOWED:
        out = _windowed(got, want)
        return {"rows": len(got), **out, "exact": out["windows_wrong"] == 0}
    if query in UPDATING:
        final = newest(got, UPDATING[query])
        diff = _multiset_diff(final, want)
        return {"rows": len(got), "keys": len(final), "expected_keys": len(want), **diff,
                "exact": diff == {"extra": 0, "missing": 0}}  # fmt: skip
    diff = _multiset_diff(got, want)
    return {"rows": len(got), "expected": len(want), **diff,
            "exact": diff == {"extra": 0, "missing": 0}}  # fmt: skip
