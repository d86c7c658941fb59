"""The queries' operators on hand-made events, and the reference on a tiny file."""

from pathlib import Path

import pytest
from sps_nexmark import queries as q
from sps_nexmark.check import compare
from sps_nexmark.generate import Generator
from sps_nexmark.reference import reference

from elastic_sps.api import run_local
from elastic_sps.pipeline.operators import Context

pytestmark = pytest.mark.unit


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


def _run_keyed(rows, op, key):
    """``op`` over ``rows`` in order, each key with its own state; every output row."""
    states: dict = {}
    out = []
    for row in rows:
        ctx = Context(op.__name__)
        ctx.key = str(row[key])
        ctx.state = states.setdefault(ctx.key, {})
        out += [r for _, r in op(row, ctx)]
    return out


def _newest(rows, key):
    newest = {}
    for r in rows:
        if r[key] not in newest or r["version"] > newest[r[key]]["version"]:
            newest[r[key]] = r
    return sorted(({k: v for k, v in r.items() if k != "version"} for r in newest.values()),
                  key=lambda r: r[key])  # fmt: skip


def test_q4_and_q6_updates_end_at_the_reference_even_when_bids_overtake_auctions():
    from sps_nexmark.generate import Generator

    events = list(Generator(200.0, seed=5).events(6_000))
    inputs = [r for e in events for _, r in q.winning_inputs(e, None)]
    # every auction's bids first: each waits in the auction's state until it comes
    inputs.sort(key=lambda r: "auction" in r)
    winning = _run_keyed(inputs, q.winning_bid, "aid")
    q4 = _newest(_run_keyed(winning, q.q4_average, "category"), "id")
    q6 = _newest(_run_keyed(winning, q.q6_average, "seller"), "seller")
    assert q4 == sorted(reference("q4", events), key=lambda r: r["id"])
    assert q6 == sorted(reference("q6", events), key=lambda r: r["seller"])
    assert len(q4) == 5 and len(q6) > 50


def test_the_winning_bid_counts_only_bids_between_start_and_expiry():
    t0 = 1_700_000_000_000
    auction = {"id": 7, "seller": 3, "category": 11, "dateTime": t0, "expires": t0 + 100}
    rows = [
        {"aid": 7, "price": 900, "dateTime": t0 + 101},  # after expiry: never counts
        {"aid": 7, "auction": auction},
        {"aid": 7, "price": 50, "dateTime": t0 + 100},
        {"aid": 7, "price": 40, "dateTime": t0 + 5},  # lower: no update
        {"aid": 7, "price": 60, "dateTime": t0 + 6},
    ]
    out = _run_keyed(rows, q.winning_bid, "aid")
    assert [r["final"] for r in out] == [50, 60]
    avg = _run_keyed([*out, {**out[0], "id": 8, "final": 75}], q.q4_average, "category")
    # auction 7 at 50, then 60; auction 8 at 75: (60 + 75) // 2 = 67
    assert [(r["final"], r["version"]) for r in avg] == [(50, 1), (60, 2), (67, 3)]


# 100 events a second of event time: 30 s, so several 10 s windows must close
EVENTS_30S = list(Generator(100.0, seed=3).events(3000))


@pytest.mark.parametrize("query", ["q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8"])
def test_every_query_in_process_equals_the_reference(query):
    run = run_local(Path(__file__).parents[1] / f"{query}.yaml", EVENTS_30S)
    assert not run.dead_letters and not run.late
    verdict = compare(query, run.outputs.get(f"nexmark.{query}", []), EVENTS_30S)
    assert verdict["exact"], verdict
    if query in ("q5", "q7", "q8"):
        assert verdict["windows_due"] >= 2, verdict


@pytest.mark.parametrize("query", ["q5", "q7", "q8"])
def test_a_windowed_query_with_no_rows_or_a_window_short_fails(query):
    verdict = compare(query, [], EVENTS_30S)
    assert not verdict["exact"] and verdict["windows_missing"] == verdict["windows_due"] >= 2
    rows = reference(query, EVENTS_30S)
    due = sorted({r["window_start"] for r in rows})[0]  # the first window: due
    verdict = compare(query, [r for r in rows if r["window_start"] != due], EVENTS_30S)
    assert not verdict["exact"] and verdict["first_missing"] == [due], verdict
    assert compare(query, rows, EVENTS_30S)["exact"]
