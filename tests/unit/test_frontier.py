"""The saved/latency frontier of a policy family and comparisons between families, on
hand-made points."""

from __future__ import annotations

import pytest

from elastic_sps.simulation.frontier import Point, covers, frontier, latency_at, on_or_below

pytestmark = pytest.mark.unit

# saved, latency: (0.5, 10) and (0.7, 20) and (0.8, 40) are the frontier; (0.6, 25) is
# beaten by (0.7, 20); (0.5, 12) by (0.5, 10)
FAMILY = [
    Point(0.6, 25, "u0.6"),
    Point(0.5, 10, "u0.5"),
    Point(0.8, 40, "u0.8"),
    Point(0.7, 20, "u0.7"),
    Point(0.5, 12, "dup"),
]


def test_the_frontier_keeps_what_nothing_beats_by_saved():
    assert [p.label for p in frontier(FAMILY)] == ["u0.5", "u0.7", "u0.8"]


def test_latency_at_interpolates_along_the_frontier():
    front = frontier(FAMILY)
    assert latency_at(front, 0.75) == pytest.approx(30.0)  # halfway from 20 to 40
    assert latency_at(front, 0.7) == pytest.approx(20.0)
    assert latency_at(front, 0.3) == 10  # saving less: its cheapest point does better
    assert latency_at(front, 0.9) is None  # it never saves that much


def test_covers_asks_every_point_of_the_other_to_be_beaten():
    mine = frontier(FAMILY)
    assert covers(mine, [Point(0.7, 20), Point(0.6, 30)])
    assert not covers(mine, [Point(0.65, 15)])  # nothing of mine saves 0.65 under 15 ms
    assert not covers(mine, [Point(0.85, 100)])  # nor saves 0.85 at all


def test_a_point_is_on_or_below_a_frontier_where_it_needs_no_more_latency():
    front = frontier(FAMILY)  # (0.5, 10), (0.7, 20), (0.8, 40)
    assert on_or_below(Point(0.75, 30), front)  # on it: halfway from 20 to 40
    assert on_or_below(Point(0.75, 25), front)
    assert not on_or_below(Point(0.75, 31), front)
    assert not on_or_below(Point(0.4, 11), front)  # (0.5, 10) saves more, faster
    assert on_or_below(Point(0.9, 500), front)  # nothing there saves 0.9
