"""Operators the engine's tests run: a keyed running sum of window results, one that
writes its state and then raises, and one that emits two outputs per event."""

from __future__ import annotations

from typing import Any


def sum_values(ev: dict[str, Any], ctx: Any) -> list[tuple[str | None, Any]]:
    ctx.state["sum"] = ctx.state.get("sum", 0) + ev["value"]
    return [(None, {"key": ev["key"], "sum": ctx.state["sum"]})]


def write_then_raise(ev: dict[str, Any], ctx: Any) -> list[tuple[str | None, Any]]:
    ctx.state["total"] = ctx.state.get("total", 0) + ev["v"]
    ctx.state.setdefault("seen", []).append(ev["v"])
    if ev["v"] > 50:
        raise ValueError(f"v {ev['v']} is too large")
    return [(None, {"k": ev["k"], "total": ctx.state["total"]})]


def split(ev: dict[str, Any], ctx: Any) -> list[tuple[str | None, Any]]:
    return [(None, {**ev, "half": 1}), (None, {**ev, "half": 2})]


def interval_join(ev: dict[str, Any], ctx: Any) -> list[tuple[str | None, Any]]:
    """A click matched to its impression (keyed by impression id) within the TTL."""
    if ev["kind"] == "impression":
        ctx.state["shown_at"] = ev["t"]
        return []
    if "shown_at" not in ctx.state:
        return []  # never shown, or shown longer ago than state_ttl_s
    return [(None, {"impression": ctx.key, "after_s": ev["t"] - ctx.state["shown_at"]})]


def checked_total(ev: dict[str, Any], ctx: Any) -> list[tuple[str | None, Any]]:
    """A stateless step after a keyed one: refuses a total above 100, and says what
    state and key it was given (a keyed head's are not its own)."""
    if ev["sum"] > 100:
        raise ValueError(f"sum {ev['sum']} is above 100")
    return [(None, {**ev, "tail_saw": [ctx.key, dict(ctx.state)]})]


def busy_windows(ev: dict[str, Any], ctx: Any) -> list[tuple[str | None, Any]]:
    """A stateless step after a window: keeps windows counting 2 or more (twice, once
    per half), refuses one counting above 5."""
    if ev["value"] > 5:
        raise ValueError(f"window {ev['key']}@{ev['start']} counts {ev['value']}")
    if ev["value"] < 2:
        return []
    return [(None, {"key": ev["key"], "n": ev["value"], "half": h}) for h in (1, 2)]


def relabel(ev: dict[str, Any], ctx: Any) -> list[tuple[str | None, Any]]:
    """A stateless step that moves a sum of exactly 13 to another key."""
    return [(None, {**ev, "key": ev["key"] + "'" if ev["sum"] == 13 else ev["key"]})]


def tally(ev: dict[str, Any], ctx: Any) -> list[tuple[str | None, Any]]:
    """A keyed step counting the sums it saw per key, the last one kept."""
    ctx.state["n"] = ctx.state.get("n", 0) + 1
    ctx.state["last"] = ev["sum"]
    return [(None, {"key": ctx.key, **ctx.state})]


def sum_twice(ev: dict[str, Any], ctx: Any) -> list[tuple[str | None, Any]]:
    """A keyed running sum with two outputs an event (its two halves)."""
    ctx.state["sum"] = ctx.state.get("sum", 0) + ev["value"]
    return [(None, {"key": ev["key"], "sum": ctx.state["sum"], "half": h}) for h in (1, 2)]


def count_seen(ev: dict[str, Any], ctx: Any) -> list[tuple[str | None, Any]]:
    """A keyed step numbering its key's events 1, 2, ...: a repeat applied twice, or an
    event lost, shows as a gap or a number twice."""
    ctx.state["n"] = ctx.state.get("n", 0) + 1
    return [(None, {"key": ctx.key, "n": ctx.state["n"]})]


def tally_halves(ev: dict[str, Any], ctx: Any) -> list[tuple[str | None, Any]]:
    """A keyed step noting each half it saw; it writes, then refuses a second half of a
    sum above 10."""
    ctx.state["n"] = ctx.state.get("n", 0) + 1
    ctx.state.setdefault("seen", []).append(ev["half"])
    if ev["half"] == 2 and ev["sum"] > 10:
        raise ValueError(f"half 2 of sum {ev['sum']}")
    return [(None, {"key": ctx.key, "n": ctx.state["n"], "seen": list(ctx.state["seen"])})]
