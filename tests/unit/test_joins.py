"""``up``'s wait for the services' consumer groups (``services/ensemble/joins.py``): which
groups, when one counts as joined, and the fixed wait where a group cannot be named or
seen."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupState, KafkaError, KafkaException

from elastic_sps.io.kafka_admin import _settled
from elastic_sps.io.topics import Topics
from elastic_sps.model import topology
from elastic_sps.services.ensemble import joins

pytestmark = pytest.mark.unit


def test_the_faust_services_and_an_ingress_that_admits_have_groups():
    topo = topology.load("twitter_remote")
    everyone = ["ingress", "monitor", "analyze", "plan", "execute", "dataplane"]
    at_ingress = joins.ensemble_groups(Topics(), topo, "run1", "ingress", everyone)
    assert at_ingress == {
        "sps-monitor": ["sps.metrics"],
        "sps-analyze": ["sps.stats"],
        "sps-plan": ["sps.analysis"],
        "sps-execute": ["sps.plans", "sps.requests"],
        "run1-ingress": [topo.source.topic("sps.ingress")],
    }
    # at the entry step the dataplane reads the source by assignment: no group
    at_entry = joins.ensemble_groups(Topics(), topo, "run1", "entry", everyone[1:])
    assert set(at_entry) == set(at_ingress) - {"run1-ingress"}


def _group(state: ConsumerGroupState, *topics: str) -> Any:
    held = SimpleNamespace(topic_partitions=[SimpleNamespace(topic=t) for t in topics])
    return SimpleNamespace(state=state, members=[SimpleNamespace(assignment=held)])


def test_a_group_has_joined_once_stable_with_its_topics_assigned():
    assert _settled(_group(ConsumerGroupState.STABLE, "a", "b"), ["a", "b"])
    assert not _settled(_group(ConsumerGroupState.PREPARING_REBALANCING, "a", "b"), ["a"])
    # a member an earlier process left, on its own topics
    assert not _settled(_group(ConsumerGroupState.STABLE, "old.a"), ["a"])
    assert not _settled(SimpleNamespace(state=ConsumerGroupState.EMPTY, members=[]), [])


def test_groups_not_seen_or_not_named_get_the_fixed_wait(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(joins.time, "sleep", slept.append)
    monkeypatch.setattr(joins.time, "monotonic", lambda: 101.0)

    def unsupported(*args: Any) -> list[str]:
        raise KafkaException(KafkaError(KafkaError.UNSUPPORTED_VERSION))

    monkeypatch.setattr(joins, "wait_groups_stable", lambda *args: [])
    joins.settle("b", {"g": ["t"]}, blind=False, since=100.0)  # all joined: no wait
    joins.settle("b", {"g": ["t"]}, blind=True, since=100.0)  # a swapped-in service
    monkeypatch.setattr(joins, "wait_groups_stable", unsupported)
    joins.settle("b", {"g": ["t"]}, blind=False, since=100.0)
    assert slept == [joins.BLIND_SETTLE_S - 1.0] * 2
