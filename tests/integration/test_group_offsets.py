"""A consumer group's offsets read and set (``io/kafka_admin``) against a real broker:
on a new broker, where groups' coordinators are still loading (where librdkafka's admin
client crashed the process: docs/2026-11-28-graceful-stop.md), and refused for a group
with a member."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer

from elastic_sps.io.kafka_admin import (
    GroupRequestFailed,
    ensure_topics,
    group_offsets,
    set_group_offsets,
)

pytestmark = pytest.mark.integration

# in a process of its own (a crash fails the test, not the run), asking at once as the
# broker is up: the coordinators load then
READS = """
import uuid
from elastic_sps.io.kafka_admin import ensure_topics, group_offsets
from tests.support import servers
with servers.kafka_broker() as bootstrap:
    topic = "t" + uuid.uuid4().hex[:6]
    ensure_topics(bootstrap, [topic], partitions=2)
    found = [group_offsets(bootstrap, "g" + uuid.uuid4().hex[:6], topic, 2) for _ in range(30)]
print(sum(1 for f in found if f == {}))
"""


def test_new_groups_on_a_new_broker_are_read_without_a_crash() -> None:
    reader = subprocess.Popen(
        [sys.executable, "-c", READS],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = reader.communicate(timeout=300)
    finally:  # a crashed reader leaves its broker behind: its group goes with it
        with contextlib.suppress(ProcessLookupError):
            os.killpg(reader.pid, signal.SIGKILL)
    assert reader.returncode == 0, err[-2000:]
    assert out.split()[-1] == "30"  # no commits in any of them


def test_offsets_are_set_only_while_the_group_has_no_member(kafka_bootstrap: str) -> None:
    topic, group = f"t{uuid.uuid4().hex[:6]}", f"g{uuid.uuid4().hex[:6]}"
    ensure_topics(kafka_bootstrap, [topic], partitions=2)
    set_group_offsets(kafka_bootstrap, group, topic, {0: 3, 1: 4})
    assert group_offsets(kafka_bootstrap, group, topic, 2) == {0: 3, 1: 4}
    member = Consumer(
        {"bootstrap.servers": kafka_bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    member.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        while not member.assignment():
            assert time.monotonic() < deadline, "never joined"
            member.poll(0.2)
        with pytest.raises(GroupRequestFailed, match=group):
            set_group_offsets(kafka_bootstrap, group, topic, {0: 7, 1: 7})
    finally:
        member.close()
    assert group_offsets(kafka_bootstrap, group, topic, 2) == {0: 3, 1: 4}
