"""The Nexmark queries' operators, with the ``nexmark/nexmark`` suite's semantics.

Every topology (``q0.yaml`` ...) reads Beam-encoded events (``generate.py``) and takes the
event time from ``dateTime`` (epoch ms). Windowed results carry ``window_start`` and
``window_end`` in epoch milliseconds; the engine's windows are in seconds.
"""

from __future__ import annotations

from typing import Any

Out = list[tuple[str | None, Any]]

Q3_STATES = ("OR", "ID", "CA")
Q3_CATEGORY = 10
Q2_SKIP = 123


def bids(ev: dict[str, Any], ctx: Any) -> Out:
    """The bids only."""
    return [(None, ev["bid"])] if "bid" in ev else []


def q0(bid: dict[str, Any], ctx: Any) -> Out:
    """q0, pass-through."""
    keep = ("auction", "bidder", "price", "dateTime", "extra")
    return [(None, {k: bid[k] for k in keep})]


def q1(bid: dict[str, Any], ctx: Any) -> Out:
    """q1, currency conversion: the price in euros (0.908 x dollars)."""
    return [(None, {**{k: bid[k] for k in ("auction", "bidder", "dateTime", "extra")},
                    "price": round(0.908 * bid["price"], 3)})]  # fmt: skip


def q2(bid: dict[str, Any], ctx: Any) -> Out:
    """q2, selection: bids on every 123rd auction."""
    return (
        [(None, {"auction": bid["auction"], "price": bid["price"]})]
        if bid["auction"] % Q2_SKIP == 0
        else []
    )


def q3_inputs(ev: dict[str, Any], ctx: Any) -> Out:
    """q3's two inputs under one key, the person: sellers in OR, ID or CA; auctions in
    category 10."""
    if "newPerson" in ev and ev["newPerson"]["state"] in Q3_STATES:
        p = ev["newPerson"]
        return [(None, {"pid": p["id"], "person": {k: p[k] for k in ("name", "city", "state")}})]
    if "newAuction" in ev and ev["newAuction"]["category"] == Q3_CATEGORY:
        a = ev["newAuction"]
        return [(None, {"pid": a["seller"], "auction": a["id"]})]
    return []


def q3_join(row: dict[str, Any], ctx: Any) -> Out:
    """q3, local item suggestion: an unbounded join of auctions and their sellers, keyed
    by person; an auction whose seller has not come yet waits in the person's state."""
    if "person" in row:
        ctx.state["person"] = row["person"]
        waiting = ctx.state.pop("waiting", [])
        return [(None, {**row["person"], "id": a}) for a in waiting]
    person = ctx.state.get("person")
    if person is None:
        ctx.state["waiting"] = [*ctx.state.get("waiting", []), row["auction"]]
        return []
    return [(None, {**person, "id": row["auction"]})]


class MaxBids:
    """The bids at the highest price (q7's partial and final aggregate)."""

    def initial(self) -> dict[str, Any]:
        return {"price": -1, "bids": []}

    def add(self, acc: dict[str, Any], bid: dict[str, Any]) -> dict[str, Any]:
        if "bids" in bid:  # a partial result: merge it
            return self.merge(acc, bid)
        row = {k: bid[k] for k in ("auction", "bidder", "price", "dateTime")}
        return self.merge(acc, {"price": bid["price"], "bids": [row]})

    def merge(self, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
        if a["price"] != b["price"]:
            return a if a["price"] > b["price"] else b
        return {"price": a["price"], "bids": sorted(a["bids"] + b["bids"], key=_bid_order)}


def _bid_order(b: dict[str, Any]) -> tuple:
    return (b["dateTime"], b["auction"], b["bidder"])


def q7_partial(result: dict[str, Any], ctx: Any) -> Out:
    """A per-auction window's highest bids, as the next stage's input."""
    return [(None, {"window": result["start"], **result["value"]})]


def q7_rows(result: dict[str, Any], ctx: Any) -> Out:
    """q7's rows: the window's highest bids, with the window in epoch ms."""
    start = result["key"]
    return [(None, {**b, **_window_ms(float(start), 10.0)}) for b in result["value"]["bids"]]


class HotItems:
    """q5's second stage: per window, the auctions with the most bids."""

    def initial(self) -> dict[str, Any]:
        return {"num": 0, "auctions": []}

    def add(self, acc: dict[str, Any], count: dict[str, Any]) -> dict[str, Any]:
        return self.merge(acc, {"num": count["value"], "auctions": [int(count["key"])]})

    def merge(self, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
        if a["num"] != b["num"]:
            return a if a["num"] > b["num"] else b
        return {"num": a["num"], "auctions": sorted(a["auctions"] + b["auctions"])}


def q5_rows(result: dict[str, Any], ctx: Any) -> Out:
    """q5's rows: each hottest auction of a 10 s window, with its bid count."""
    win = _window_ms(float(result["key"]), 10.0)
    return [(None, {"auction": a, "num": result["value"]["num"], **win})
            for a in result["value"]["auctions"]]  # fmt: skip


def q8_inputs(ev: dict[str, Any], ctx: Any) -> Out:
    """q8's two inputs under one key, the person: a new person, an auction by a seller."""
    if "newPerson" in ev:
        return [(None, {"pid": ev["newPerson"]["id"], "name": ev["newPerson"]["name"]})]
    if "newAuction" in ev:
        return [(None, {"pid": ev["newAuction"]["seller"], "auction": 1})]
    return []


class PersonAndAuction:
    """q8's window aggregate: the person's name, if the person came in the window, and
    whether it created an auction in it."""

    def initial(self) -> dict[str, Any]:
        return {"name": None, "auctions": 0}

    def add(self, acc: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
        if "name" in row:
            return {**acc, "name": row["name"]}
        return {**acc, "auctions": acc["auctions"] + 1}


def q8_rows(result: dict[str, Any], ctx: Any) -> Out:
    """q8's rows: persons who created an auction in the 10 s window they came in."""
    acc = result["value"]
    if acc["name"] is None or not acc["auctions"]:
        return []
    win = _window_ms(float(result["start"]), 10.0)
    return [(None, {"id": int(result["key"]), "name": acc["name"],
                    "starttime": win["window_start"], **win})]  # fmt: skip


def winning_inputs(ev: dict[str, Any], ctx: Any) -> Out:
    """q4's and q6's two inputs under one key, the auction: the auction itself, its bids."""
    if "newAuction" in ev:
        a = ev["newAuction"]
        keep = ("id", "seller", "category", "dateTime", "expires")
        return [(None, {"aid": a["id"], "auction": {k: a[k] for k in keep}})]
    if "bid" in ev:
        b = ev["bid"]
        return [(None, {"aid": b["auction"], "price": b["price"], "dateTime": b["dateTime"]})]
    return []


def winning_bid(row: dict[str, Any], ctx: Any) -> Out:
    """The highest price bid on an auction between its start and its expiry, as an update
    each time it rises (keyed by auction). A bid that overtook its auction waits in the
    auction's state."""
    if "auction" in row:
        ctx.state["auction"] = row["auction"]
        bids = ctx.state.pop("waiting", [])
    elif "auction" not in ctx.state:
        ctx.state["waiting"] = [*ctx.state.get("waiting", []), [row["price"], row["dateTime"]]]
        return []
    else:
        bids = [[row["price"], row["dateTime"]]]
    a = ctx.state["auction"]
    valid = [price for price, t in bids if a["dateTime"] <= t <= a["expires"]]
    if not valid or max(valid) <= ctx.state.get("final", -1):
        return []
    ctx.state["final"] = max(valid)
    keep = ("id", "seller", "category")
    return [(None, {**{k: a[k] for k in keep}, "final": ctx.state["final"]})]


def _updated(ctx: Any, auctions: list[list[int]], row: dict[str, Any]) -> list[list[int]]:
    """``auctions`` ([id, final] pairs) with ``row``'s auction at its higher final."""
    finals = dict(map(tuple, auctions))  # type: ignore[arg-type]
    finals[row["id"]] = max(finals.get(row["id"], -1), row["final"])
    return sorted([a, f] for a, f in finals.items())


def _version(ctx: Any) -> int:
    # each update per key numbered, so a reader of the changelog can take the newest
    ctx.state["version"] = ctx.state.get("version", 0) + 1
    return int(ctx.state["version"])


def q4_average(row: dict[str, Any], ctx: Any) -> Out:
    """q4, average price per category: the mean of its auctions' winning bids, as an
    update per winning-bid update (keyed by category). The suite's AVG over BIGINT, so
    the integer part."""
    auctions = _updated(ctx, ctx.state.get("auctions", []), row)
    ctx.state["auctions"] = auctions
    final = sum(f for _, f in auctions) // len(auctions)
    return [(None, {"id": row["category"], "final": final, "version": _version(ctx)})]


Q6_AUCTIONS = 10


def q6_average(row: dict[str, Any], ctx: Any) -> Out:
    """q6, average selling price by seller: the mean winning bid of the seller's last 10
    auctions (by id, the order they were created in) that have one, as an update (keyed
    by seller). An auction older than the last 10 never comes back, so only they are kept."""
    auctions = _updated(ctx, ctx.state.get("auctions", []), row)[-Q6_AUCTIONS:]
    if ctx.state.get("auctions") == auctions:
        return []
    ctx.state["auctions"] = auctions
    avg = sum(f for _, f in auctions) // len(auctions)
    return [(None, {"seller": row["seller"], "avg_price": avg, "version": _version(ctx)})]


def _window_ms(start_s: float, size_s: float) -> dict[str, int]:
    return {"window_start": round(start_s * 1000), "window_end": round((start_s + size_s) * 1000)}
