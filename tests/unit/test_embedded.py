"""The embedded Apache Kafka's cluster id: never one the storage tool takes for an option."""

from __future__ import annotations

import uuid

import pytest

from shared.io import embedded

pytestmark = pytest.mark.unit


def test_a_cluster_id_never_starts_with_a_dash(monkeypatch):
    """Bytes starting 0xF8 encode to '-' first in URL-safe base64 (6 bits 111110 = 62):
    `kafka-storage format -t -...` failed ("expected one argument"). Such an id is drawn
    again."""
    drawn = iter([uuid.UUID(bytes=b"\xf8" + b"\x00" * 15), uuid.UUID(bytes=b"\x04" + b"\x00" * 15)])
    monkeypatch.setattr(embedded.uuid, "uuid4", lambda: next(drawn))
    assert embedded.cluster_id() == "BAAAAAAAAAAAAAAAAAAAAA"


def test_the_embedded_broker_is_apache_kafka_unless_tansu_is_asked_for(monkeypatch):
    monkeypatch.delenv("SPS_EMBEDDED_BROKER", raising=False)
    assert embedded.broker_kind() == "kafka"
    monkeypatch.setenv("SPS_EMBEDDED_BROKER", "tansu")
    assert embedded.broker_kind() == "tansu"
    monkeypatch.setenv("SPS_EMBEDDED_BROKER", "redpanda")
    with pytest.raises(embedded.PrerequisiteError, match="kafka or tansu"):
        embedded.broker_kind()
