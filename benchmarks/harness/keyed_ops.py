"""Operators the keyed-state benchmark runs (``benchmarks/bench_state.py``): a running
total per key that carries the event's send time to its output, keyed or not by the
topology alone."""

from __future__ import annotations

from typing import Any


def running_total(ev: dict[str, Any], ctx: Any) -> list[tuple[str | None, Any]]:
    ctx.state["n"] = ctx.state.get("n", 0) + 1
    ctx.state["total"] = ctx.state.get("total", 0) + ev["v"]
    return [(None, {"k": ev["k"], "n": ctx.state["n"], "sent": ev["sent"]})]
