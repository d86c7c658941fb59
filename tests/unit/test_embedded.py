"""The embedded servers: Apache Kafka's cluster id, and the ports handed to processes."""

from __future__ import annotations

import uuid

import pytest

from elastic_sps.io import embedded

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


def test_a_free_port_is_never_one_the_kernel_hands_out_itself(monkeypatch):
    """Ports from bind(0) come from the ephemeral range; Spark's accumulator server, which
    binds port 0, took a dataplane's web port between the choice and the dataplane's own
    bind. A port below that range, distinct on every call, cannot be taken so."""
    monkeypatch.setattr(embedded, "_ephemeral_range", lambda: (32768, 60999))
    ports = [embedded.free_port() for _ in range(50)]
    assert all(10000 <= p < 32768 for p in ports)
    assert len(set(ports)) == 50


def test_a_machine_whose_ephemeral_range_starts_low_gets_ports_above_it(monkeypatch):
    monkeypatch.setattr(embedded, "_ephemeral_range", lambda: (1024, 40000))
    assert all(40000 < embedded.free_port() < 65536 for _ in range(20))
