"""A shop's orders: a running total per customer (a keyed operator with per-key state)
and each customer's spend per 10 s of event time (a window operator's aggregate)."""

from __future__ import annotations

from typing import Any


def running_total(order: dict[str, Any], ctx: Any) -> list[tuple[str | None, Any]]:
    """Keyed by customer: ``ctx.state`` is this customer's, kept exactly once per order."""
    ctx.state["total"] = round(ctx.state.get("total", 0.0) + order["amount"], 2)
    ctx.state["orders"] = ctx.state.get("orders", 0) + 1
    return [
        (
            None,
            {
                "customer": ctx.key,
                "order": order["order_id"],
                "orders": ctx.state["orders"],
                "total": ctx.state["total"],
            },
        )
    ]


class Spend:
    """The window's aggregate: orders and amount, merged for sessions."""

    def initial(self) -> dict[str, float]:
        return {"orders": 0, "amount": 0.0}

    def add(self, acc: dict[str, float], order: dict[str, Any]) -> dict[str, float]:
        return {"orders": acc["orders"] + 1, "amount": round(acc["amount"] + order["amount"], 2)}

    def merge(self, a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
        return {"orders": a["orders"] + b["orders"], "amount": round(a["amount"] + b["amount"], 2)}

    def result(self, acc: dict[str, float]) -> dict[str, float]:
        return acc
