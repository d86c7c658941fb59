"""What a run of the orders pipeline (``examples/orders``: a running total per customer,
orders per customer and window) must have output, computed from the events file alone,
beside what it did output. Outputs are at least once with deterministic ids: a repeat
must carry its first delivery's value."""

from __future__ import annotations

import collections
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# The orders pipeline as the stateful tests and the fault benchmark run it: a keyed running
# total per customer, and orders per customer and 2 s of event time (no code: a count).
TOPOLOGY = """
name: orders-stateful
source: {topics: [orders], format: json, id: "field:order_id", time: "field:ts",
         key: customer}
operators:
  - {name: total, code: "sps_orders.operators:running_total", key: "field:customer",
     et_ms: 2, max_replicas: 4, output: orders.totals}
  - {name: count, key: "field:customer", window: {tumbling_s: 2}, et_ms: 1,
     max_replicas: 4, output: orders.counts}
edges:
  - {from: source, to: total}
  - {from: source, to: count}
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


def check_windows(sent: Sequence[dict], windows: dict[str, Any], size_s: float) -> list[str]:
    """Every closed window's count (``value``, or ``value["orders"]``) equals the orders
    of its customer whose time falls in it. Empty: all exact."""
    expected: collections.Counter = collections.Counter()
    for e in sent:
        expected[(e["customer"], int(e["ts"] // size_s) * size_s)] += 1
    wrong = []
    for wid, w in windows.items():
        value = w["value"]["orders"] if isinstance(w["value"], dict) else w["value"]
        if wid != f"{w['key']}@{w['start']}" or value != expected[(w["key"], w["start"])]:
            wrong.append(f"{wid}: {value}, expected {expected[(w['key'], w['start'])]}")
    return wrong
