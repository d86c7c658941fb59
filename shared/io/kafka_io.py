"""Reading a whole topic back (reports, tests). aiokafka: it reads the embedded broker's
batches reliably; a read stops at what was written before it began."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any


def read_topic(bootstrap: str, topic: str, quiet_s: float = 2.0, max_s: float = 20.0) -> list[Any]:
    """Every JSON record of ``topic`` (all partitions) written before the call
    (``read_topics``)."""
    return read_topics(bootstrap, [topic], quiet_s, max_s)[topic]


def read_topics(
    bootstrap: str, topics: list[str], quiet_s: float = 2.0, max_s: float = 20.0
) -> dict[str, list[Any]]:
    """Every JSON record of each of ``topics`` (all partitions) written before the call,
    by topic, read by one consumer (one start and one quiet wait for them all); non-JSON
    records are skipped.

    A partition is caught up once it yields a record stamped after the read began, and
    the read ends when no partition that is not caught up has delivered for ``quiet_s``
    (or after ``max_s``). Services that keep publishing every interval therefore do not
    hold the read open until ``max_s``. Why not the high watermarks: the embedded broker
    reports them wrongly (``high_watermarks``). A broker that stamps no time falls back
    to the quiet rule alone."""
    from aiokafka import AIOKafkaConsumer

    from elastic_sps.io.connections import KafkaSecurity

    async def run() -> dict[str, list[Any]]:
        c = AIOKafkaConsumer(
            *topics,
            bootstrap_servers=bootstrap,
            auto_offset_reset="earliest",
            group_id=None,
            enable_auto_commit=False,
            **KafkaSecurity().aiokafka(),
        )
        began_ms = time.time() * 1000.0
        await c.start()
        out: dict[str, list[Any]] = {t: [] for t in topics}
        caught_up: set[Any] = set()
        try:
            quiet = begin = time.monotonic()
            while time.monotonic() - quiet < quiet_s and time.monotonic() - begin < max_s:
                batch = await c.getmany(timeout_ms=200)
                for tp, msgs in batch.items():
                    if tp in caught_up:
                        continue
                    quiet = time.monotonic()
                    for m in msgs:
                        if m.timestamp is not None and m.timestamp >= began_ms:
                            caught_up.add(tp)  # written after the call began: not ours
                            continue
                        try:
                            out[tp.topic].append(json.loads(m.value))
                        except ValueError:
                            continue
        finally:
            await c.stop()
        return out

    return asyncio.run(run())


_LIST_OFFSETS_TRIES = 6  # 0.2 s doubling: about 6 s of leader election at most


def _electing(err: Any) -> bool:
    from confluent_kafka import KafkaError

    codes = (
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
    )
    return bool(err.retriable()) or err.code() in codes


def end_offsets(
    admin: Any, partitions: dict[str, int], timeout: float = 10.0
) -> dict[str, list[int]]:
    """Each topic's partitions' high watermarks (the end of what may be read), in one
    batched ListOffsets request per broker: ``partitions`` is topic -> partition count.
    Right on Apache Kafka; the Tansu broker reports them wrongly for multi-record
    batches, hence its producers' registry (``SPS_PARTITION_ENDS=registry``)."""
    from confluent_kafka import KafkaException, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    wanted = {
        TopicPartition(topic, j): OffsetSpec.latest()
        for topic, n in partitions.items()
        for j in range(n)
    }
    out = {topic: [0] * n for topic, n in partitions.items()}
    for attempt in range(_LIST_OFFSETS_TRIES):
        retry = {}
        for tp, fut in admin.list_offsets(wanted, request_timeout=timeout).items():
            try:
                out[tp.topic][tp.partition] = int(fut.result().offset)
            except KafkaException as exc:
                # a partition whose leader is still being elected (a topic just made, a
                # broker restarting) answers with a retriable error: ask again
                if not _electing(exc.args[0]) or attempt == _LIST_OFFSETS_TRIES - 1:
                    raise
                retry[tp] = wanted[tp]
        if not retry:
            return out
        wanted = retry
        time.sleep(0.2 * 2**attempt)
    return out


def take_ready(consumer: Any, max_n: int, wait_s: float) -> list[Any]:
    """Up to ``max_n`` records the consumer holds now; when it holds none, the first one
    to arrive within ``wait_s`` and whatever came with it.

    confluent-kafka's ``consume(n, timeout)`` returns early only once it has ``n``
    records: at a trickle each read would wait its whole timeout, and every operator hop
    with it. ``poll`` returns the moment one record is there."""
    msgs: list[Any] = consumer.consume(num_messages=max_n, timeout=0)
    if msgs or wait_s <= 0:
        return msgs
    first = consumer.poll(wait_s)
    if first is None:
        return []
    return [first, *consumer.consume(num_messages=max_n - 1, timeout=0)] if max_n > 1 else [first]
