"""Topic creation. The control topics have one partition: their consumers rely on order
(the embedded broker auto-creates topics with several partitions, which scrambles it)."""

from __future__ import annotations

import time
from collections.abc import Iterable

from confluent_kafka.admin import AdminClient, NewTopic

from elastic_sps.io.connections import kafka_config


def ensure_topics(
    bootstrap: str, names: Iterable[str], partitions: int = 1, timeout: float = 15.0
) -> None:
    admin = AdminClient(kafka_config(bootstrap))
    existing = set(admin.list_topics(timeout=timeout).topics)
    wanted = [
        NewTopic(n, num_partitions=partitions, replication_factor=1)
        for n in dict.fromkeys(names)
        if n not in existing
    ]
    if not wanted:
        return
    for name, fut in admin.create_topics(wanted, request_timeout=timeout).items():
        try:
            fut.result()
        except Exception as exc:  # a concurrent creator got there first
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise RuntimeError(f"cannot create topic {name}: {exc}") from exc


def partition_count(bootstrap: str, topic: str, wait_s: float = 0.0) -> int:
    """How many partitions ``topic`` has (0: it does not exist or cannot be read);
    ``wait_s``: how long to wait for a topic just created to show them (a broker's
    metadata of a new topic may say "leader not available" for a moment)."""
    admin = AdminClient(kafka_config(bootstrap))
    deadline = time.monotonic() + wait_s
    while True:
        found = admin.list_topics(topic, timeout=15.0).topics.get(topic)
        if found is not None and found.error is None and found.partitions:
            return len(found.partitions)
        if time.monotonic() >= deadline:
            return 0
        time.sleep(0.2)
