"""A shop's orders: a running total per customer (a keyed operator with per-key state)
and each customer's spend per 10 s of event time (a window operator's aggregate).

A two-stage pipeline over the same orders (``benchmarks/harness/orders_check.py`` checks it):
``validate`` (stateless) checks each order and turns its amount into integer cents, so
that sums are exact whatever order they are taken in; ``SpendCents`` is a window's
aggregate (orders and cents per customer and window); ``ledger``, keyed by customer
over the window results, keeps a running count of the customer's windows and total of
their cents in ``ctx.state``."""

from __future__ import annotations

from typing import Any

Out = list[tuple[str | None, Any]]


def running_total(order: dict[str, Any], ctx: Any) -> Out:
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


def validate(order: dict[str, Any], ctx: Any) -> Out:
    """Stateless: an order with an id, a customer, a positive amount and a time, its
    amount in integer cents; anything else raises (the event is dead-lettered)."""
    amount = order.get("amount")
    if (
        not isinstance(order.get("order_id"), str)
        or not isinstance(order.get("customer"), str)
        or isinstance(amount, bool)
        or not isinstance(amount, int | float)
        or amount <= 0
        or not isinstance(order.get("ts"), int | float)
    ):
        raise ValueError(f"not an order: {order!r}")
    return [
        (
            None,
            {
                "order_id": order["order_id"],
                "customer": order["customer"],
                "amount": amount,
                "cents": round(amount * 100),
                "ts": order["ts"],
            },
        )
    ]


class SpendCents:
    """A window's aggregate over validated orders: how many, and their cents."""

    def initial(self) -> dict[str, int]:
        return {"orders": 0, "cents": 0}

    def add(self, acc: dict[str, int], order: dict[str, Any]) -> dict[str, int]:
        return {"orders": acc["orders"] + 1, "cents": acc["cents"] + order["cents"]}

    def merge(self, a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
        return {"orders": a["orders"] + b["orders"], "cents": a["cents"] + b["cents"]}


def ledger(window: dict[str, Any], ctx: Any) -> Out:
    """Keyed by customer (the window result's ``key``), over its windows in the order
    they close: the window's orders and cents, with the customer's running count of
    windows and total of cents so far (``ctx.state``, once per window result)."""
    value = window["value"]
    ctx.state["windows"] = ctx.state.get("windows", 0) + 1
    ctx.state["cents"] = ctx.state.get("cents", 0) + value["cents"]
    return [
        (
            None,
            {
                "customer": ctx.key,
                "start": window["start"],
                "end": window["end"],
                "orders": value["orders"],
                "cents": value["cents"],
                "windows": ctx.state["windows"],
                "total_cents": ctx.state["cents"],
            },
        )
    ]
