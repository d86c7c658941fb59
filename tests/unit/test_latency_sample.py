"""The dataplane's latency reservoir: exact sum and count, every event equally likely kept."""

from __future__ import annotations

import random

import pytest

from elastic_sps.services.dataplane.sample import LatencySample

pytestmark = pytest.mark.unit


def test_the_first_events_fill_the_sample_and_the_sum_is_exact() -> None:
    s = LatencySample(3)
    for v in (1.0, 2.0, -4.0):  # a negative wait (two clocks) counts as 0
        s.add(v)
    assert s.values == [1.0, 2.0, 0.0] and s.total == 3.0 and s.n == 3
    for v in range(4, 104):
        s.add(float(v))
    assert len(s.values) == 3 and s.n == 103 and s.total == 3.0 + sum(range(4, 104))


def test_every_event_is_equally_likely_kept() -> None:
    """10 of 100 events kept, over 4,000 seeded reservoirs: each event's share of them is
    0.1 (within 0.02; the binomial's standard deviation is 0.0047)."""
    kept = [0] * 100
    runs = 4000
    for seed in range(runs):
        s = LatencySample(10, rng=random.Random(seed))
        for v in range(100):
            s.add(float(v))
        for v in s.values:
            kept[int(v)] += 1
    shares = [k / runs for k in kept]
    assert all(abs(x - 0.1) < 0.02 for x in shares), (min(shares), max(shares))
    assert abs(sum(shares[:50]) - sum(shares[50:])) < 0.1  # early and late alike


def test_a_negative_or_undefined_wait_counts_as_none() -> None:
    """Two processes' clocks can put an event's end before its send: that wait is 0, as is
    one computed from a time that is not a number."""
    s = LatencySample(4)
    for v in (-3.0, float("nan"), 2.5):
        s.add(v)
    assert s.values == [0.0, 0.0, 2.5]
    assert (s.total, s.n) == (2.5, 3)
