"""The live check's verdicts on hand-made rows: windowed queries are judged on every
window that must have closed (its end at most the largest event time), not only on the
windows a run wrote out."""

import pytest
from sps_nexmark.check import compare

pytestmark = pytest.mark.unit

T0 = 1_700_000_000_000  # a multiple of 10 s: windows start at T0, T0 + 10 s, ...


def _bid(auction, price, dt):
    return {"bid": {"auction": auction, "bidder": 1, "price": price, "dateTime": T0 + dt,
                    "extra": ""}}  # fmt: skip


def _person(pid, name, dt):
    return {"newPerson": {"id": pid, "name": name, "dateTime": T0 + dt}}


EVENTS = [
    {"newAuction": {"id": 5, "seller": 9, "category": 10, "dateTime": T0, "expires": T0 + 50}},
    _bid(5, 10, 1), _bid(5, 30, 2), _bid(5, 20, 3), _bid(6, 99, 20_000),
]  # fmt: skip

# The largest event time is T0 + 20 s (the person at the end), so a window ending at or
# before it must be out: q7's [T0, T0 + 10 s) and [T0 + 10 s, T0 + 20 s) (its end equals
# the watermark: closed), not [T0 + 20 s, T0 + 30 s), which the person opens.
HAND = [
    _person(1000, "Ann", 0),
    {"newAuction": {"id": 5, "seller": 1000, "category": 10, "dateTime": T0 + 1,
                    "expires": T0 + 50}},
    _bid(5, 10, 1), _bid(5, 30, 2), _bid(6, 20, 3),
    _bid(6, 99, 12_000),
    _person(1001, "Bob", 20_000),
]  # fmt: skip


def _q7_row(auction, price, dt, start):
    return {"auction": auction, "bidder": 1, "price": price, "dateTime": T0 + dt,
            "window_start": T0 + start, "window_end": T0 + start + 10_000}  # fmt: skip


Q7_FIRST = _q7_row(5, 30, 2, 0)  # the highest bid of [T0, T0 + 10 s): 30 on auction 5
Q7_SECOND = _q7_row(6, 99, 12_000, 10_000)  # of [T0 + 10 s, T0 + 20 s): 99 on 6


def test_an_updating_query_is_judged_by_each_keys_newest_version():
    old = {"id": 10, "final": 10, "version": 1}
    new = {"id": 10, "final": 30, "version": 2}
    assert compare("q4", [new, old], EVENTS)["exact"]  # the order read does not matter
    verdict = compare("q4", [old], EVENTS)
    assert not verdict["exact"] and verdict["missing"] == 1 and verdict["extra"] == 1


def test_a_window_still_open_may_be_out_or_not_but_is_judged_when_out():
    # EVENTS end at T0 + 20 s: [T0, T0 + 10 s) is due, [T0 + 10 s, T0 + 20 s) has no bid,
    # [T0 + 20 s, T0 + 30 s) (the bid at T0 + 20 s) is still open
    first = _q7_row(5, 30, 2, 0)
    verdict = compare("q7", [first], EVENTS)
    assert verdict["exact"] and verdict["windows_due"] == 1 and verdict["windows_closed"] == 1
    late = _q7_row(6, 99, 20_000, 20_000)
    assert compare("q7", [first, late], EVENTS)["exact"]  # out early: fine, if exact
    assert compare("q7", [first, {**late, "price": 98}], EVENTS)["windows_wrong"] == 1
    wrong = {**first, "price": 20}
    assert compare("q7", [wrong], EVENTS)["windows_wrong"] == 1


def test_q7_an_empty_output_or_a_missing_window_fails():
    verdict = compare("q7", [], HAND)
    assert not verdict["exact"]
    assert verdict["windows_due"] == 2 and verdict["windows_missing"] == 2
    verdict = compare("q7", [Q7_FIRST], HAND)  # the window ending at the watermark is due
    assert not verdict["exact"] and verdict["first_missing"] == [T0 + 10_000]
    assert compare("q7", [Q7_FIRST, Q7_SECOND], HAND)["exact"]
    # a row for a window the reference has none for is wrong
    stray = _q7_row(6, 20, 3, 30_000)
    assert compare("q7", [Q7_FIRST, Q7_SECOND, stray], HAND)["windows_wrong"] == 1


def test_lateness_holds_the_window_ending_at_the_watermark_back():
    verdict = compare("q7", [Q7_FIRST], HAND, lateness_s=5)  # T0 + 25 s > T0 + 20 s
    assert verdict["exact"] and verdict["windows_due"] == 1
    verdict = compare("q7", [], HAND, lateness_s=10)  # T0 + 20 s <= T0 + 20 s: due
    assert not verdict["exact"] and verdict["windows_missing"] == 1


def test_q8_an_empty_output_fails():
    # Ann came at T0 and created auction 5 at T0 + 1 ms: one row, window [T0, T0 + 10 s);
    # Bob (T0 + 20 s) created nothing
    row = {"id": 1000, "name": "Ann", "starttime": T0, "window_start": T0,
           "window_end": T0 + 10_000}  # fmt: skip
    verdict = compare("q8", [], HAND)
    assert not verdict["exact"] and verdict["windows_missing"] == 1
    assert compare("q8", [row], HAND)["exact"]
    assert not compare("q8", [{**row, "name": "Bob"}], HAND)["exact"]


def _q5_row(auction, num, start):
    return {"auction": auction, "num": num, "window_start": T0 + start,
            "window_end": T0 + start + 10_000}  # fmt: skip


def test_q5_an_empty_output_or_a_missing_window_fails():
    # 10 s windows every 2 s. The bids at T0 + 1, 2, 3 ms (auctions 5, 5, 6) are in the
    # five starting at T0 - 8 s ... T0: auction 5 is hottest with 2. The bid on 6 at
    # T0 + 12 s is in the five starting at T0 + 4 s ... T0 + 12 s: 6 with 1. Due (end at
    # most T0 + 20 s): the first five and those starting at T0 + 4, 6, 8, 10 s: nine.
    first = [_q5_row(5, 2, s) for s in range(-8_000, 1, 2_000)]
    second = [_q5_row(6, 1, s) for s in range(4_000, 10_001, 2_000)]
    verdict = compare("q5", [], HAND)
    assert not verdict["exact"]
    assert verdict["windows_due"] == 9 and verdict["windows_missing"] == 9
    verdict = compare("q5", first + second[:-1], HAND)
    assert not verdict["exact"] and verdict["first_missing"] == [T0 + 10_000]
    assert compare("q5", first + second, HAND)["exact"]
    # the window starting at T0 + 12 s ends at T0 + 22 s: open, may be out
    assert compare("q5", [*first, *second, _q5_row(6, 1, 12_000)], HAND)["exact"]
    assert not compare("q5", [*first, *second, _q5_row(5, 1, 12_000)], HAND)["exact"]


@pytest.mark.parametrize("query", ["q5", "q7", "q8"])
def test_nothing_due_nothing_needed(query):
    # the events up to T0 + 3 ms: the earliest window end is q5's T0 + 2 s, none is due
    early = [e for e in HAND if next(iter(e.values()))["dateTime"] <= T0 + 3]
    verdict = compare(query, [], early)
    assert verdict["exact"] and verdict["windows_due"] == 0, verdict


def test_an_appending_query_counts_extra_and_missing_rows():
    verdict = compare("q2", [{"auction": 5, "price": 10}], EVENTS)
    assert verdict == {"rows": 1, "expected": 0, "extra": 1, "missing": 0, "exact": False}
