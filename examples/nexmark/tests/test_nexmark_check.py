"""The live check's verdicts on hand-made rows."""

from sps_nexmark.check import compare

T0 = 1_700_000_000_000


def _bid(auction, price, dt):
    return {"bid": {"auction": auction, "bidder": 1, "price": price, "dateTime": T0 + dt,
                    "extra": ""}}  # fmt: skip


EVENTS = [
    {"newAuction": {"id": 5, "seller": 9, "category": 10, "dateTime": T0, "expires": T0 + 50}},
    _bid(5, 10, 1), _bid(5, 30, 2), _bid(5, 20, 3), _bid(6, 99, 20_000),
]  # fmt: skip


def test_an_updating_query_is_judged_by_each_keys_newest_version():
    old = {"id": 10, "final": 10, "version": 1}
    new = {"id": 10, "final": 30, "version": 2}
    assert compare("q4", [new, old], EVENTS)["exact"]  # the order read does not matter
    verdict = compare("q4", [old], EVENTS)
    assert not verdict["exact"] and verdict["missing"] == 1 and verdict["extra"] == 1


def test_a_windowed_query_is_judged_on_the_windows_it_closed():
    first = {"auction": 5, "bidder": 1, "price": 30, "dateTime": T0 + 2,
             "window_start": T0, "window_end": T0 + 10_000}  # fmt: skip
    verdict = compare("q7", [first], EVENTS)
    assert verdict["exact"] and verdict["windows_closed"] == 1  # the second is still open
    wrong = {**first, "price": 20}
    assert compare("q7", [wrong], EVENTS)["windows_wrong"] == 1


def test_an_appending_query_counts_extra_and_missing_rows():
    verdict = compare("q2", [{"auction": 5, "price": 10}], EVENTS)
    assert verdict == {"rows": 1, "expected": 0, "extra": 1, "missing": 0, "exact": False}
