"""The queries' operators on hand-made events, and the reference on a tiny file."""

from sps_nexmark import queries as q
from sps_nexmark.reference import reference

from shared.pipeline.operators import Context


def test_q3_joins_an_auction_with_a_seller_that_comes_later():
    ctx = Context("q3")
    ctx.key = "1001"
    assert q.q3_join({"pid": 1001, "auction": 7}, ctx) == []
    person = {"name": "Kate Smith", "city": "Boise", "state": "ID"}
    assert q.q3_join({"pid": 1001, "person": person}, ctx) == [(None, {**person, "id": 7})]
    assert q.q3_join({"pid": 1001, "auction": 8}, ctx) == [(None, {**person, "id": 8})]


def test_q5_and_q7_aggregates_keep_every_tie():
    hot = q.HotItems()
    acc = hot.initial()
    for key, n in (("1000", 3), ("1001", 5), ("1002", 5)):
        acc = hot.add(acc, {"key": key, "value": n})
    assert acc == {"num": 5, "auctions": [1001, 1002]}
    top = q.MaxBids()
    acc = top.initial()
    for a, price, t in ((1, 10, 5), (2, 30, 6), (3, 30, 4)):
        acc = top.add(acc, {"auction": a, "bidder": 9, "price": price, "dateTime": t})
    assert acc["price"] == 30 and [b["auction"] for b in acc["bids"]] == [3, 2]
    rows = q.q7_rows({"key": "1700000000", "value": acc}, None)
    assert rows[0][1]["window_start"] == 1_700_000_000_000
    assert rows[0][1]["window_end"] == 1_700_000_010_000


def test_q8_rows_only_for_a_person_with_an_auction_in_the_window():
    agg = q.PersonAndAuction()
    acc = agg.add(agg.add(agg.initial(), {"pid": 5, "name": "Paul"}), {"pid": 5, "auction": 1})
    out = q.q8_rows({"key": "5", "start": 1_700_000_000, "value": acc}, None)
    start, end = 1_700_000_000_000, 1_700_000_010_000
    row = {"id": 5, "name": "Paul", "starttime": start, "window_start": start, "window_end": end}
    assert out == [(None, row)]
    assert q.q8_rows({"key": "5", "start": 1, "value": agg.initial()}, None) == []


def test_the_reference_on_a_tiny_file():
    t0 = 1_700_000_000_000
    events = [
        {"newPerson": {"id": 1000, "name": "A B", "city": "Boise", "state": "ID", "dateTime": t0}},
        {"newAuction": {"id": 1000, "seller": 1000, "category": 10, "dateTime": t0 + 1}},
        {"bid": {"auction": 1000, "bidder": 1000, "price": 50, "dateTime": t0 + 2, "extra": ""}},
        {"bid": {"auction": 1001, "bidder": 1000, "price": 70, "dateTime": t0 + 3, "extra": ""}},
        {
            "bid": {
                "auction": 1001,
                "bidder": 1001,
                "price": 70,
                "dateTime": t0 + 10_001,
                "extra": "",
            }
        },
    ]
    assert reference("q3", events) == [{"name": "A B", "city": "Boise", "state": "ID", "id": 1000}]
    assert reference("q8", events)[0]["id"] == 1000
    q7 = reference("q7", events)
    assert sorted((r["window_start"] - t0, r["dateTime"] - t0) for r in q7) == [
        (0, 3),
        (10_000, 10_001),
    ]
    q5 = [r for r in reference("q5", events) if r["window_start"] == t0]
    # the window [t0, t0 + 10 s) holds bids on 1000 (one) and 1001 (one): a tie
    assert sorted(r["auction"] for r in q5) == [1000, 1001]
    assert reference("q2", events) == []
