"""The Twitter pipeline in quix-streams, in its natural form: one Application whose
StreamingDataFrame chains the four operator functions (a process per input partition
scales it). The sink's Redis writes go out as one pipeline per 100 records or 50 ms,
quix-streams having no per-batch hook for them. Run by ``benchmarks/bench_peers.py`` in
its own virtualenv (quix-streams pins an older confluent-kafka and pydantic).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from types import SimpleNamespace
from typing import Any

import redis
from quixstreams import Application
from sps_twitter import operators as twitter


class BatchedWrites:
    """A Redis pipeline executed every ``every`` commands or ``max_s`` seconds."""

    def __init__(self, r: redis.Redis, every: int = 100, max_s: float = 0.05) -> None:
        self.pipe, self.every, self.max_s = r.pipeline(transaction=False), every, max_s
        self.since = time.monotonic()

    def hincrby(self, *args: Any) -> None:
        self.pipe.hincrby(*args)
        if len(self.pipe) >= self.every or time.monotonic() - self.since > self.max_s:
            self.pipe.execute()
            self.since = time.monotonic()


def stage(fn: Any, ctx: Any) -> Any:
    def apply(value: dict) -> dict:
        meta = value.pop("_meta")
        (_, out), *_ = fn(value, ctx)
        return {**out, "_meta": meta}

    return apply


def main() -> None:
    ap = argparse.ArgumentParser()
    for flag in ("--bootstrap", "--redis", "--src", "--dst", "--group", "--prefix"):
        ap.add_argument(flag, required=True)
    args = ap.parse_args()
    ctx = SimpleNamespace(
        writes=BatchedWrites(redis.Redis.from_url(args.redis)), prefix=args.prefix
    )
    app = Application(
        broker_address=args.bootstrap,
        consumer_group=args.group,
        auto_offset_reset="earliest",
        auto_create_topics=False,
        # a state folder of its own: by default every process of the group creates
        # ./state/<group> in the working directory, and the two processes started at once
        # raced on it (one died of FileExistsError, and the run waited on outputs that
        # never came: "500 of 500 outputs missing"); the pipeline keeps no state
        state_dir=tempfile.mkdtemp(prefix="sps-peers-quix-"),
    )
    src = app.topic(args.src, value_deserializer="json")
    dst = app.topic(args.dst, value_serializer="json")
    sdf = app.dataframe(src)
    for fn in (twitter.parse, twitter.classify_content, twitter.classify_author, twitter.store):
        sdf = sdf.apply(stage(fn, ctx))
    sdf.to_topic(dst)
    app.run()


if __name__ == "__main__":
    main()
