"""Reading a whole topic back (reports, tests). aiokafka: it reads the embedded broker's
batches reliably, and stops after ``quiet_s`` without news or ``max_s`` in all."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any


def read_topic(bootstrap: str, topic: str, quiet_s: float = 2.0, max_s: float = 20.0) -> list[Any]:
    """Every JSON record of ``topic`` (all partitions); non-JSON records are skipped."""
    from aiokafka import AIOKafkaConsumer

    from shared.connections import KafkaSecurity

    async def run() -> list[Any]:
        c = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            auto_offset_reset="earliest",
            group_id=None,
            enable_auto_commit=False,
            **KafkaSecurity().aiokafka(),
        )
        await c.start()
        out: list[Any] = []
        try:
            quiet = begin = time.monotonic()
            while time.monotonic() - quiet < quiet_s and time.monotonic() - begin < max_s:
                batch = await c.getmany(timeout_ms=200)
                for msgs in batch.values():
                    quiet = time.monotonic()
                    for m in msgs:
                        try:
                            out.append(json.loads(m.value))
                        except ValueError:
                            continue
        finally:
            await c.stop()
        return out

    return asyncio.run(run())


def high_watermarks(consumer: Any, topic: str, partitions: int) -> list[int]:
    """The broker's high watermark of each partition (ListOffsets, uncached): the end of
    what may be read. Right on Apache Kafka; the embedded Tansu broker reports it wrongly
    for multi-record batches (../shared/ARCHITECTURE.md), hence the producers' registry."""
    from confluent_kafka import TopicPartition

    return [
        int(consumer.get_watermark_offsets(TopicPartition(topic, j), timeout=10, cached=False)[1])
        for j in range(partitions)
    ]
