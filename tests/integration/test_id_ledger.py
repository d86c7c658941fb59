"""The id ledger against a real redis-server: a loss between two operators shows by id,
and a replayed duplicate cannot hide it."""

import pytest

from elastic_sps.io import id_ledger
from elastic_sps.io.id_ledger import IdBatch

pytestmark = pytest.mark.integration


def test_a_loss_between_two_operators_shows_and_a_duplicate_hides_nothing(redis_client):
    """Five events enter a → b. a processes all five and sends them to b; b processes
    e1, e2 (e2 twice: a replay), expires e3, dead-letters e4 and never sees e5. The
    counters at b would read 3 processed + 1 expired + 1 dead = 5 = sent; by id, e5 is
    lost at b and nowhere else."""
    ingress, a, b = IdBatch("run1"), IdBatch("run1"), IdBatch("run1")
    for k in range(1, 6):
        ingress.add("a", "sent", f"e{k}")
        a.add("a", "processed", f"e{k}")
        a.add("b", "sent", f"e{k}")
    for eid in ("e1", "e2", "e2"):
        b.add("b", "processed", eid)
    b.add("b", "expired", "e3")
    b.add("b", "dead", "e4")
    pipe = redis_client.pipeline(transaction=False)
    for batch in (ingress, a, b):
        batch.write(pipe)
    pipe.execute()
    acc_a, acc_b = id_ledger.stage_accounts(redis_client, "run1", ["a", "b"])
    assert (acc_a.sent, acc_a.processed, acc_a.lost) == (5, 5, 0)
    assert (acc_b.sent, acc_b.processed, acc_b.expired, acc_b.dead, acc_b.lost) == (5, 2, 1, 1, 1)
    assert id_ledger.completed_ids(redis_client, "run1", ["b"]) == {"e1", "e2"}
    # the sets expire with the run, and another run's prefix sees none of them
    assert 0 < redis_client.ttl(id_ledger.key("run1", "b", "sent")) <= id_ledger.TTL_S
    assert id_ledger.stage_accounts(redis_client, "run2", ["b"])[0].sent == 0


def test_a_chained_members_failed_input_is_beside_the_chains_fates(redis_client):
    """Three events enter the chain c; all three are processed (the head took them), and
    a member after the head fails on e2's output (which keeps e2's id) and on e3's second
    output `e3/1`. c's stage: 3 sent, 3 processed, none dead or lost, 2 members' inputs
    dead-lettered beside them; as a sink, only e1 completed (e2 and e3 are incomplete:
    one of their outputs failed in a member)."""
    batch = IdBatch("run3")
    for k in range(1, 4):
        batch.add("c", "sent", f"e{k}")
        batch.add("c", "processed", f"e{k}")
    batch.add("c", "members_dead", "e2")
    batch.add("c", "members_dead", "e3/1")
    batch.add("c", "incomplete", "e2")
    batch.add("c", "incomplete", "e3")
    pipe = redis_client.pipeline(transaction=False)
    batch.write(pipe)
    pipe.execute()
    (acc,) = id_ledger.stage_accounts(redis_client, "run3", ["c"])
    assert (acc.sent, acc.processed, acc.dead, acc.lost, acc.members_dead) == (3, 3, 0, 0, 2)
    assert acc.incomplete == 2
    assert id_ledger.completed_count(redis_client, "run3", ["c"]) == 1
    assert id_ledger.completed_ids(redis_client, "run3", ["c"]) == {"e1"}
