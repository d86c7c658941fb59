"""Topic creation. The control topics have one partition: their consumers rely on order
(the embedded broker auto-creates topics with several partitions, which scrambles it)."""

from __future__ import annotations

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
