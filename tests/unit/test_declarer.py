"""A replica slot's declarations (``elastic_sps.services.dataplane.declaring.Declarer``): the
first of a task always goes, changes at most every DECLARE_EVERY_S, a wake from idle at once, what
was held back once its interval has passed (with a record or without) and at the task's end."""

from __future__ import annotations

import pytest

from elastic_sps.io.watermarks import Declaration, decode_declaration
from elastic_sps.services.dataplane import declaring
from elastic_sps.services.dataplane.declaring import Declarer

pytestmark = pytest.mark.unit


class Sent:
    """Collects what the declarer produces (topic, partition, declaration)."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, int, Declaration]] = []

    def produce(self, topic: str, body: bytes, partition: int) -> None:
        self.rows.append((topic, partition, decode_declaration(body)))


def test_the_first_goes_to_every_partition_then_changes_are_paced():
    sent = Sent()
    d = Declarer(sent, [("t.b", 0), ("t.b", 1)])
    d.offer(Declaration("a", 0, 2, 10.0))
    assert [(t, p, x.wm) for t, p, x in sent.rows] == [("t.b", 0, 10.0), ("t.b", 1, 10.0)]
    d.offer(Declaration("a", 0, 2, 11.0))  # within the interval: held
    assert len(sent.rows) == 2 and d.pending is not None
    d.flush()  # the task's end
    assert [x.wm for _, _, x in sent.rows[2:]] == [11.0, 11.0]


def test_a_wake_from_idle_goes_at_once():
    sent = Sent()
    d = Declarer(sent, [("t.b", 0)])
    d.offer(Declaration("a", 0, 1, 10.0, idle=True))
    d.offer(Declaration("a", 0, 1, 10.0, idle=False))
    assert [x.idle for _, _, x in sent.rows] == [True, False]


def test_a_held_declaration_goes_once_its_interval_has_passed_without_a_record(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(declaring.time, "monotonic", lambda: now[0])
    sent = Sent()
    d = Declarer(sent, [("t.b", 0)])
    assert d.held_until() is None
    d.offer(Declaration("a", 0, 1, 10.0))  # at 100.0: goes
    now[0] = 100.05
    d.offer(Declaration("a", 0, 1, 11.0))  # held until 100.2
    assert d.held_until() == pytest.approx(100.2)
    now[0] = 100.15
    d.send_held()
    assert [x.wm for _, _, x in sent.rows] == [10.0]
    now[0] = 100.2
    d.send_held()
    assert [x.wm for _, _, x in sent.rows] == [10.0, 11.0] and d.held_until() is None
