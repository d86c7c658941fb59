"""The orders example's operators on their own, as a user tests them: no broker, no
Spark; ``Context`` carries the key and a plain dict as the key's state."""

from sps_orders.generate import orders
from sps_orders.operators import Spend, running_total

from shared.pipeline.operators import Context


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
