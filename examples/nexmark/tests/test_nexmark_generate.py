"""The Nexmark generator against the specification's facts, hand-checked."""

import collections

import pytest
from sps_nexmark.generate import Generator, last_auction, last_person

pytestmark = pytest.mark.unit


def test_each_fifty_events_hold_one_person_three_auctions_and_46_bids():
    kinds = [next(iter(e)) for e in Generator(rate=1000, seed=1).events(500)]
    assert collections.Counter(kinds) == {"newPerson": 10, "newAuction": 30, "bid": 460}
    assert kinds[:5] == ["newPerson", "newAuction", "newAuction", "newAuction", "bid"]


def test_ids_times_and_references_follow_the_model():
    events = list(Generator(rate=1000, seed=2).events(200))
    people = [e["newPerson"] for e in events if "newPerson" in e]
    auctions = [e["newAuction"] for e in events if "newAuction" in e]
    assert [p["id"] for p in people] == [1000, 1001, 1002, 1003]
    assert [a["id"] for a in auctions][:6] == [1000, 1001, 1002, 1003, 1004, 1005]
    # event n at base + n ms at 1,000 events/s
    times = [next(iter(e.values()))["dateTime"] for e in events]
    assert times[:3] == [1_700_000_000_000, 1_700_000_000_001, 1_700_000_000_002]
    # event 4 (the first bid): newest person 0, newest auction 2 (base 0)
    assert (last_person(4), last_auction(4)) == (0, 2)
    # event 50 is a person: the newest auction is the previous epoch's last, 2
    assert (last_person(50), last_auction(50)) == (1, 2)
    bids = [e["bid"] for e in events if "bid" in e]
    assert all(1000 <= b["auction"] <= 1000 + last_auction(199) + 10 for b in bids)
    assert all(a["category"] in range(10, 15) for a in auctions)


def test_a_seed_gives_the_same_file_and_about_half_the_bids_are_for_the_hot_auction():
    a = list(Generator(rate=500, seed=7).events(5000))
    assert a == list(Generator(rate=500, seed=7).events(5000))
    # the hot auction of event n: the first of the newest 100 auctions
    hot = [
        e["bid"]["auction"] == last_auction(n) // 100 * 100 + 1000
        for n, e in enumerate(a)
        if "bid" in e
    ]
    assert 0.45 < sum(hot) / len(hot) < 0.6  # 1/2 by choice, plus the random picks of it
