"""Topic creation and a consumer group's committed offsets. The control topics have one
partition: their consumers rely on order (the embedded broker auto-creates topics with
several partitions, which scrambles it)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

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
    metadata of a new topic may say "leader not available" for a moment). Never creates
    it: a producer's metadata request for a missing topic does, with the broker's default
    partitions, where the broker allows that (Apache Kafka's default)."""
    admin = AdminClient(kafka_config(bootstrap, **{"allow.auto.create.topics": False}))
    deadline = time.monotonic() + wait_s
    while True:
        found = admin.list_topics(topic, timeout=15.0).topics.get(topic)
        if found is not None and found.error is None and found.partitions:
            return len(found.partitions)
        if time.monotonic() >= deadline:
            return 0
        time.sleep(0.2)


def topic_ends(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's high watermark (the end of what may be read; none: no topic)."""
    from elastic_sps.io.kafka_io import end_offsets

    n = partition_count(bootstrap, topic)
    return (
        dict(enumerate(end_offsets(AdminClient(kafka_config(bootstrap)), {topic: n})[topic]))
        if n
        else {}
    )


class GroupRequestFailed(RuntimeError):
    """The broker refused a consumer group request (as for offsets of a group with members)."""


GROUP_WAIT_S = 60.0  # a new broker's offsets topic and group coordinator take seconds to be up


def _not_ready(err: Any) -> bool:
    """Whether a group request failed because its coordinator is not ready yet (or did
    not answer in time, as while it loads)."""
    from confluent_kafka import KafkaError

    codes = (
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError._TIMED_OUT,
    )
    return err is not None and err.code() in codes


def _as_group(bootstrap: str, group: str, ask: Callable[[Any], list[Any]]) -> list[Any]:
    """``ask``'s answer (a group's partitions) from a consumer of ``group`` that never
    joins it, asked again every 0.5 s for up to ``GROUP_WAIT_S`` while the group's
    coordinator is not ready. The broker's refusal raises ``GroupRequestFailed``; a
    client-side error, ``KafkaException``. A consumer, not the admin client: librdkafka's
    admin client crashes the process (``rd_kafka_cgrp_op``: it has no group handle) when
    an offset request meets a coordinator not ready, as on a new broker."""
    from confluent_kafka import Consumer, KafkaException

    deadline = time.monotonic() + GROUP_WAIT_S
    c = Consumer(kafka_config(bootstrap, **{"group.id": group, "enable.auto.commit": False}))
    try:
        while True:
            try:
                answer = ask(c)
            except KafkaException as exc:
                errors = [exc.args[0]]
            else:
                errors = [tp.error for tp in answer if tp.error is not None]
                if not errors:
                    return answer
            if not all(_not_ready(e) for e in errors) or time.monotonic() > deadline:
                if errors[0].code() < 0:  # librdkafka's own (negative codes): not a refusal
                    raise KafkaException(errors[0])
                raise GroupRequestFailed(f"{group}: {errors[0]}")
            time.sleep(0.5)
    finally:
        c.close()


def group_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The consumer group's committed offsets of ``topic``'s partitions (those it never
    committed left out)."""
    from confluent_kafka import TopicPartition

    wanted = [TopicPartition(topic, j) for j in range(partitions)]
    answer = _as_group(bootstrap, group, lambda c: c.committed(wanted, timeout=15.0))
    return {tp.partition: tp.offset for tp in answer if tp.offset >= 0}


def set_group_offsets(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit ``offsets`` (partition -> the next offset to read) for the consumer group,
    which must have no member (Kafka refuses a commit from outside a group with members,
    and this raises ``GroupRequestFailed``)."""
    from confluent_kafka import TopicPartition

    told = [TopicPartition(topic, j, at) for j, at in sorted(offsets.items())]
    _as_group(bootstrap, group, lambda c: c.commit(offsets=told, asynchronous=False) or [])


def group_readers(bootstrap: str, group: str, topic: str) -> int:
    """Members of ``group`` with partitions of ``topic`` assigned (none: no such group
    yet, or its coordinator not up)."""
    from confluent_kafka import KafkaException

    admin = AdminClient(kafka_config(bootstrap))
    (fut,) = admin.describe_consumer_groups([group], request_timeout=15.0).values()
    try:
        described = fut.result()
    except KafkaException:
        return 0
    return sum(
        any(tp.topic == topic for tp in m.assignment.topic_partitions)
        for m in described.members
        if m.assignment is not None
    )


def service_group(service: str) -> str:
    """A built-in faust service's consumer group: its app's id (``services/runtime.py``)."""
    return f"sps-{service}"


def _settled(described: Any, topics: Iterable[str]) -> bool:
    """STABLE (no join or rebalance under way), its members holding a partition of each
    of ``topics``: a member left by an earlier process of the group reads other topics."""
    from confluent_kafka import ConsumerGroupState

    held = {
        tp.topic
        for m in described.members
        if m.assignment is not None
        for tp in m.assignment.topic_partitions
    }
    return described.state == ConsumerGroupState.STABLE and bool(held) and set(topics) <= held


def wait_groups_stable(
    bootstrap: str, groups: Mapping[str, Iterable[str]], timeout_s: float
) -> list[str]:
    """Wait until each consumer group of ``groups`` (group -> the topics it reads) has
    settled (``_settled``): a record produced next is fetched at once, not after the
    join. Returns the groups not settled within ``timeout_s`` (none: all were). A group
    not there yet, or its coordinator not ready, is asked again every 0.1 s; any other
    error (a broker without the request) raises ``KafkaException``."""
    from confluent_kafka import KafkaError, KafkaException

    admin = AdminClient(kafka_config(bootstrap))
    deadline = time.monotonic() + timeout_s
    pending = {g: list(topics) for g, topics in groups.items()}
    while pending:
        wait = max(1.0, min(10.0, deadline - time.monotonic()))
        for group, fut in admin.describe_consumer_groups(
            list(pending), request_timeout=wait
        ).items():
            try:
                described = fut.result()
            except KafkaException as exc:
                err = exc.args[0]
                if _not_ready(err) or err.code() == KafkaError.GROUP_ID_NOT_FOUND:
                    continue
                raise
            if _settled(described, pending[group]):
                del pending[group]
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    return sorted(pending)
