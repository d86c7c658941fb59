"""What a run of the orders pipelines (``examples/orders``) must have output, computed
from the events file alone, beside what it did output. Plain Python over the events:
nothing here calls the engine. Outputs are at least once with deterministic ids: a
repeat must carry its first delivery's value (``outputs_once``).

Windows are [start, end) in seconds of the orders' ``ts``. Once a run's input is
consumed the watermark is the largest ``ts`` sent, so every window whose end plus the
lateness is at most that must be out, once, with the exact value; a later window may be
out or not, and is judged only if it is."""

from __future__ import annotations

import collections
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "PIPELINE", "TOPOLOGY", "WINDOW_S", "cents", "check_ledger", "check_totals",
    "check_windows", "expected_windows", "is_due", "ledger_windows", "outputs_once",
]  # fmt: skip

# The one-stage orders pipeline (the fault benchmark runs it): a keyed running total per
# customer, and orders per customer and 2 s of event time (no code: a count).
TOPOLOGY = """
name: orders-stateful
source: {topics: [orders], format: json, id: "field:order_id", time: "field:ts",
         key: "field:customer"}
operators:
  - {name: total, code: "sps_orders.operators:running_total", key: "field:customer",
     et_ms: 2, max_replicas: 4, output: orders.totals}
  - {name: count, key: "field:customer", window: {tumbling_s: 2}, et_ms: 1,
     max_replicas: 4, output: orders.counts}
edges:
  - {from: source, to: total}
  - {from: source, to: count}
"""

WINDOW_S = 5.0  # the two-stage pipeline's window
# The two-stage pipeline (tests/e2e/test_stateful_pipeline.py): `validate` (stateless,
# a pool of up to 4) checks each order and adds its cents; `spend` sums each customer's
# orders and cents per 5 s of event time; each window's result goes on to `ledger`, keyed
# by customer, which keeps the customer's running count of windows and total of cents in
# its state and outputs them per window (the window's id: ``<customer>@<start>``).
# `total` keeps each customer's running total per order (as above) and reads the source
# itself: a stateless pool routes by load, not by key, so behind it a customer's orders
# would reach `total` in no set order, and a running total per order would not be defined.
PIPELINE = """
name: orders-two-stage
source: {topics: [orders], format: json, id: "field:order_id", time: "field:ts",
         key: "field:customer"}
operators:
  - {name: validate, code: "sps_orders.operators:validate", et_ms: 0.2, max_replicas: 4}
  - {name: total, code: "sps_orders.operators:running_total", key: "field:customer",
     et_ms: 2, max_replicas: 4, output: orders.totals}
  - {name: spend, code: "sps_orders.operators:SpendCents", key: "field:customer",
     window: {tumbling_s: 5}, et_ms: 1, max_replicas: 4}
  - {name: ledger, code: "sps_orders.operators:ledger", key: "field:key", et_ms: 1,
     max_replicas: 4, output: orders.ledger}
edges:
  - {from: source, to: validate}
  - {from: source, to: total}
  - {from: validate, to: spend}
  - {from: spend, to: ledger}
"""


def outputs_once(path: str | Path) -> tuple[dict[str, Any], list[str]]:
    """Each id's first value, and the ids repeated with a different value."""
    seen: dict[str, Any] = {}
    differ = []
    for line in Path(path).read_text().splitlines():
        row = json.loads(line)
        first = seen.setdefault(row["id"], row["value"])
        if first != row["value"]:
            differ.append(row["id"])
    return seen, differ


def check_totals(sent: Sequence[dict], totals: dict[str, Any]) -> list[str]:
    """Per order: its customer's count and running total as of that order (a customer's
    orders reach the keyed operator in the file's order). Empty: all exact."""
    wrong = []
    if set(totals) != {e["order_id"] for e in sent}:
        wrong.append("the outputs are not one per order sent")
    running: dict[str, float] = collections.defaultdict(float)
    counts: collections.Counter = collections.Counter()
    for e in sent:
        c = e["customer"]
        counts[c] += 1
        running[c] = round(running[c] + e["amount"], 2)
        out = totals.get(e["order_id"])
        if out is None:
            continue
        if (out["customer"], out["orders"]) != (c, counts[c]) or abs(
            out["total"] - running[c]
        ) > 1e-6:
            wrong.append(f"{e['order_id']}: {out} after {counts[c]} orders, {running[c]}")
    return wrong


def _num(x: Any) -> float:
    """A window bound, compared numerically (``2``, ``2.0`` and ``"2"`` are one)."""
    return round(float(x), 6)


def cents(amount: float) -> int:
    return round(amount * 100)


def expected_windows(sent: Sequence[dict], size_s: float) -> dict[tuple[str, float], dict]:
    """(customer, window start) -> the window's orders and cents, for every window that
    holds an order sent."""
    out: dict[tuple[str, float], dict] = {}
    for e in sent:
        start = _num(int(e["ts"] // size_s) * size_s)
        w = out.setdefault((e["customer"], start), {"orders": 0, "cents": 0})
        w["orders"] += 1
        w["cents"] += cents(e["amount"])
    return out


def is_due(start: float, size_s: float, lateness_s: float, watermark: float) -> bool:
    """Whether the window [start, start + size) must have closed under ``watermark``."""
    return start + size_s + lateness_s <= watermark


def check_windows(
    sent: Sequence[dict], windows: dict[str, Any], size_s: float, lateness_s: float = 0.0
) -> list[str]:
    """``windows``: id -> ``{"key", "start", "end", "value"}`` as a window operator emits
    them (repeats dropped); ``value`` a count of orders, or a mapping with ``orders`` (and
    ``cents``, if there, is checked too). Every window out has the id
    ``<key>@<start>``, ends at start + size and holds exactly its customer's orders whose
    time falls in it; every window whose end + ``lateness_s`` is at most the largest time
    sent is out. Empty: all exact."""
    expected = expected_windows(sent, size_s)
    watermark = max((e["ts"] for e in sent), default=float("-inf"))
    wrong = []
    out = set()
    for wid, w in windows.items():
        key, start = w["key"], _num(w["start"])
        out.add((key, start))
        id_key, _, id_start = wid.rpartition("@")
        try:
            same_id = id_key == key and _num(id_start) == start
        except ValueError:
            same_id = False
        if not same_id:
            wrong.append(f"{wid}: the id of a window of {key!r} starting at {w['start']}")
        if _num(w["end"]) != _num(start + size_s):
            wrong.append(f"{wid}: ends at {w['end']}, not {start + size_s}")
        value = w["value"]
        got = (
            {k: value[k] for k in ("orders", "cents") if k in value}
            if isinstance(value, dict)
            else {"orders": value}
        )
        want = expected.get((key, start))
        if want is None:
            wrong.append(f"{wid}: {value}, but no order of {key} falls in it")
        elif got != {k: want[k] for k in got} or "orders" not in got:
            wrong.append(f"{wid}: {value}, expected {want}")
    for (key, start), want in sorted(expected.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if (key, start) not in out and is_due(start, size_s, lateness_s, watermark):
            wrong.append(
                f"{key}@{start}: never came out (expected {want}; it ends at "
                f"{start + size_s} + lateness {lateness_s} <= the largest time {watermark})"
            )
    return wrong


def ledger_windows(ledger: dict[str, Any]) -> dict[str, Any]:
    """The windows the ledger's outputs (id -> value) carry, as ``check_windows`` takes
    them (each ledger output is one window result of ``spend``, under its id)."""
    return {
        lid: {"key": v["customer"], "start": v["start"], "end": v["end"],
              "value": {"orders": v["orders"], "cents": v["cents"]}}
        for lid, v in ledger.items()
    }  # fmt: skip


def check_ledger(
    sent: Sequence[dict], ledger: dict[str, Any], size_s: float, lateness_s: float = 0.0
) -> list[str]:
    """The second stage: each customer's windows reach ``ledger`` in the order of their
    starts, each once, so its output for a customer's k-th window (counting every window
    that holds an order of the customer) says ``windows`` k and ``total_cents`` the sum
    of that customer's first k windows' cents. Its final state per customer (the output
    with the most windows) covers at least every window due, with their exact total.
    Empty: all exact."""
    expected = expected_windows(sent, size_s)
    watermark = max((e["ts"] for e in sent), default=float("-inf"))
    starts: dict[str, list[float]] = collections.defaultdict(list)
    for key, start in sorted(expected, key=lambda ks: ks[1]):
        starts[key].append(start)
    running: dict[str, list[int]] = {}
    for key, ss in starts.items():
        total, running[key] = 0, []
        for s in ss:
            total += expected[(key, s)]["cents"]
            running[key].append(total)
    wrong = []
    final: dict[str, dict] = {}
    for lid, v in ledger.items():
        key, start = v["customer"], _num(v["start"])
        if start not in starts.get(key, []):
            wrong.append(f"{lid}: {v}, but no order of {key} falls in that window")
            continue
        k = starts[key].index(start) + 1
        if (v["windows"], v["total_cents"]) != (k, running[key][k - 1]):
            wrong.append(
                f"{lid}: window {v['windows']} of {key}, total {v['total_cents']} cents; "
                f"expected window {k}, total {running[key][k - 1]}"
            )
        if key not in final or v["windows"] > final[key]["windows"]:
            final[key] = v
    for key, ss in sorted(starts.items()):
        due = sum(1 for s in ss if is_due(s, size_s, lateness_s, watermark))
        if due and (key not in final or final[key]["windows"] < due):
            got = final.get(key, {}).get("windows", 0)
            wrong.append(
                f"{key}: the ledger's state after {got} windows; {due} are due, "
                f"total {running[key][due - 1]} cents"
            )
    return wrong
