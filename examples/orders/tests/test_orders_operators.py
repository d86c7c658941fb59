"""The orders example's operators on their own, as a user tests them: no broker, no
Spark; ``Context`` carries the key and a plain dict as the key's state."""

import pytest
from sps_orders.generate import orders
from sps_orders.operators import Spend, SpendCents, ledger, running_total, validate

from elastic_sps.pipeline.operators import Context

pytestmark = pytest.mark.unit


def test_the_running_total_keeps_each_customers_state():
    alice, bob = Context("total"), Context("total")
    alice.key, bob.key = "alice", "bob"
    outs = [
        running_total({"order_id": "o1", "amount": 10.0}, alice),
        running_total({"order_id": "o2", "amount": 5.5}, bob),
        running_total({"order_id": "o3", "amount": 2.25}, alice),
    ]
    assert [o[0][1]["total"] for o in outs] == [10.0, 5.5, 12.25]
    assert [o[0][1]["orders"] for o in outs] == [1, 1, 2]
    assert alice.state == {"total": 12.25, "orders": 2}


def test_spend_adds_and_merges():
    agg = Spend()
    acc = agg.add(agg.add(agg.initial(), {"amount": 1.5}), {"amount": 2.0})
    assert acc == {"orders": 2, "amount": 3.5}
    assert agg.merge(acc, {"orders": 1, "amount": 1.0}) == {"orders": 3, "amount": 4.5}


def test_the_generator_is_deterministic_and_its_event_times_follow_the_rate():
    rows = orders(300, rate=100.0, seed=4)
    assert rows == orders(300, rate=100.0, seed=4)
    assert [r["ts"] for r in rows[:3]] == [0.0, 0.01, 0.02]
    assert len({r["order_id"] for r in rows}) == 300


def test_validate_adds_cents_and_rejects_what_is_not_an_order():
    order = {"order_id": "o1", "customer": "c1", "amount": 19.99, "ts": 1.5}
    assert validate(order, None) == [(None, {**order, "cents": 1999})]
    for bad in ({**order, "amount": -1}, {**order, "amount": True}, {"order_id": "o2"}):
        with pytest.raises(ValueError, match="not an order"):
            validate(bad, None)


def test_spend_cents_counts_orders_and_sums_cents_exactly():
    agg = SpendCents()
    acc = agg.initial()
    for c in (1999, 1, 250):
        acc = agg.add(acc, {"cents": c})
    assert acc == {"orders": 3, "cents": 2250}
    assert agg.merge(acc, {"orders": 1, "cents": 50}) == {"orders": 4, "cents": 2300}


def test_the_ledger_keeps_each_customers_running_total_of_windows():
    ctx = Context("ledger")
    ctx.key = "c1"
    first = {"key": "c1", "start": 0, "end": 5, "value": {"orders": 2, "cents": 300}}
    second = {"key": "c1", "start": 5, "end": 10, "value": {"orders": 1, "cents": 25}}
    out = [ledger(first, ctx)[0][1], ledger(second, ctx)[0][1]]
    assert [(o["start"], o["windows"], o["total_cents"]) for o in out] == [(0, 1, 300), (5, 2, 325)]
    assert out[1] == {"customer": "c1", "start": 5, "end": 10, "orders": 1, "cents": 25,
                      "windows": 2, "total_cents": 325}  # fmt: skip
    assert ctx.state == {"windows": 2, "cents": 325}
