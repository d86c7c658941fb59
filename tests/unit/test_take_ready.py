"""``take_ready``: what a consumer holds now, else the first record to arrive."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_sps.io.kafka_io import take_ready

pytestmark = pytest.mark.unit


class HeldRecords:
    """A consumer's local queue: ``consume(n, 0)`` returns what it holds (at most n),
    ``poll`` the next record that arrives, or None after its timeout."""

    def __init__(self, held: list[str], arriving: list[str]) -> None:
        self.held, self.arriving = held, arriving
        self.polls: list[float] = []

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        assert timeout == 0, "take_ready never blocks in consume (it waits for n records)"
        out, self.held = self.held[:num_messages], self.held[num_messages:]
        return out

    def poll(self, timeout: float) -> Any:
        self.polls.append(timeout)
        if not self.arriving:
            return None
        first, *rest = self.arriving
        self.arriving = []
        self.held += rest  # what came in the same fetch
        return first


def test_held_records_are_taken_without_waiting() -> None:
    c = HeldRecords(["a", "b", "c"], ["late"])
    assert take_ready(c, 2, 0.05) == ["a", "b"]
    assert take_ready(c, 2, 0.05) == ["c"]
    assert c.polls == []


def test_with_nothing_held_the_first_arrival_and_its_fetch_are_taken() -> None:
    c = HeldRecords([], ["x", "y", "z"])
    assert take_ready(c, 10, 0.05) == ["x", "y", "z"]
    assert c.polls == [0.05]


def test_nothing_arrives_within_the_wait() -> None:
    c = HeldRecords([], [])
    assert take_ready(c, 10, 0.05) == []
    assert take_ready(c, 10, 0) == []
    assert c.polls == [0.05]


def test_one_at_most() -> None:
    c = HeldRecords([], ["x", "y"])
    assert take_ready(c, 1, 0.05) == ["x"]
    assert take_ready(c, 1, 0.05) == ["y"]
