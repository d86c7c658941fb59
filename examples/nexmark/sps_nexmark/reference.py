"""The queries' results computed directly over an events file, written apart from the
operators (plain Python, whole-file passes, integer milliseconds), to check them against.

``reference(query, events)`` gives the result rows; windowed queries' rows carry
``window_start`` and ``window_end`` (epoch ms); the updating queries' (q4, q6) one row
per key, the final value (a live run's newest update per key).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable
from typing import Any

Row = dict[str, Any]


def _bids(events: Iterable[dict]) -> list[dict]:
    return [e["bid"] for e in events if "bid" in e]


def q0(events: list[dict]) -> list[Row]:
    return [
        {k: b[k] for k in ("auction", "bidder", "price", "dateTime", "extra")}
        for b in _bids(events)
    ]


def q1(events: list[dict]) -> list[Row]:
    return [{"auction": b["auction"], "bidder": b["bidder"], "dateTime": b["dateTime"],
             "extra": b["extra"], "price": round(b["price"] * 908 / 1000, 3)}
            for b in _bids(events)]  # fmt: skip


def q2(events: list[dict]) -> list[Row]:
    return [
        {"auction": b["auction"], "price": b["price"]}
        for b in _bids(events)
        if b["auction"] % 123 == 0
    ]


def q3(events: list[dict]) -> list[Row]:
    people = {e["newPerson"]["id"]: e["newPerson"] for e in events if "newPerson" in e}
    rows = []
    for e in events:
        a = e.get("newAuction")
        if a is None or a["category"] != 10:
            continue
        p = people.get(a["seller"])
        if p is not None and p["state"] in ("OR", "ID", "CA"):
            rows.append({"name": p["name"], "city": p["city"], "state": p["state"], "id": a["id"]})
    return rows


def _winning_bids(events: list[dict]) -> dict[int, tuple[dict, int]]:
    """Every auction with a bid between its start and expiry: (auction, highest price)."""
    auctions = {e["newAuction"]["id"]: e["newAuction"] for e in events if "newAuction" in e}
    best: dict[int, int] = {}
    for b in _bids(events):
        a = auctions.get(b["auction"])
        if a is not None and a["dateTime"] <= b["dateTime"] <= a["expires"]:
            best[a["id"]] = max(best.get(a["id"], b["price"]), b["price"])
    return {aid: (auctions[aid], price) for aid, price in best.items()}


def q4(events: list[dict]) -> list[Row]:
    """One row per category: its final average (what the last update says)."""
    per_category: dict[int, list[int]] = collections.defaultdict(list)
    for a, price in _winning_bids(events).values():
        per_category[a["category"]].append(price)
    return [{"id": c, "final": sum(ps) // len(ps)} for c, ps in per_category.items()]


def q6(events: list[dict]) -> list[Row]:
    """One row per seller: the mean winning price of its 10 newest auctions with a bid."""
    per_seller: dict[int, list[tuple[int, int]]] = collections.defaultdict(list)
    for aid, (a, price) in _winning_bids(events).items():
        per_seller[a["seller"]].append((aid, price))
    rows = []
    for seller, sold in per_seller.items():
        last = [p for _, p in sorted(sold)[-10:]]
        rows.append({"seller": seller, "avg_price": sum(last) // len(last)})
    return rows


def _tumbling(ms: int, size_ms: int) -> int:
    return ms - ms % size_ms


def q5(events: list[dict]) -> list[Row]:
    counts: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for b in _bids(events):
        start = _tumbling(b["dateTime"], 2000)
        while start > b["dateTime"] - 10_000:  # every 10 s window sliding by 2 s holding it
            counts[start][b["auction"]] += 1
            start -= 2000
    rows = []
    for start, per_auction in counts.items():
        top = max(per_auction.values())
        rows += [{"auction": a, "num": n, "window_start": start, "window_end": start + 10_000}
                 for a, n in per_auction.items() if n == top]  # fmt: skip
    return rows


def q7(events: list[dict]) -> list[Row]:
    windows: dict[int, list[dict]] = collections.defaultdict(list)
    for b in _bids(events):
        windows[_tumbling(b["dateTime"], 10_000)].append(b)
    rows = []
    for start, bs in windows.items():
        top = max(b["price"] for b in bs)
        rows += [{"auction": b["auction"], "bidder": b["bidder"], "price": b["price"],
                  "dateTime": b["dateTime"], "window_start": start, "window_end": start + 10_000}
                 for b in bs if b["price"] == top]  # fmt: skip
    return rows


def q8(events: list[dict]) -> list[Row]:
    persons: dict[tuple[int, int], str] = {}
    sellers: set[tuple[int, int]] = set()
    for e in events:
        if "newPerson" in e:
            p = e["newPerson"]
            persons[(p["id"], _tumbling(p["dateTime"], 10_000))] = p["name"]
        elif "newAuction" in e:
            a = e["newAuction"]
            sellers.add((a["seller"], _tumbling(a["dateTime"], 10_000)))
    return [{"id": pid, "name": name, "starttime": start, "window_start": start,
             "window_end": start + 10_000}
            for (pid, start), name in persons.items() if (pid, start) in sellers]  # fmt: skip


QUERIES: dict[str, Callable[[list[dict]], list[Row]]] = {
    "q0": q0, "q1": q1, "q2": q2, "q3": q3, "q4": q4, "q5": q5, "q6": q6, "q7": q7, "q8": q8,
}  # fmt: skip


def reference(query: str, events: list[dict]) -> list[Row]:
    return QUERIES[query](events)
