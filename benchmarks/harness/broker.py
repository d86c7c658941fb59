"""The broker as the comparisons share it: warmed before any engine is measured on it, and
its JIT compilation told apart from the work an engine gives it.

A freshly started broker JVM compiles its hot paths during its first minutes of traffic;
the compiler's CPU counts as the broker's, so whichever engine ran first on a new broker
was charged for it (``docs/2026-11-27-broker.md``). ``warm_broker`` moves records through
the broker's produce and fetch paths until its compiler goes quiet; ``jit_seconds`` reads
the compiler's time so far from the JVM's own counters (``jcmd PerfCounter.print``), so
each measured row can say how much of the broker's CPU was compilation."""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from elastic_sps.io.kafka_admin import ensure_topics

WARM_PARTITIONS = 4
WARM_STEP_S = 5.0
WARM_QUIET = 0.05  # the compiler's share of a step below which the step is quiet
WARM_QUIET_STEPS = 3  # quiet steps in a row that make the broker warm (one can be a lull)
_PORT = re.compile(r":(\d+)$")


def parse_jit_seconds(perf_counters: str) -> float | None:
    """The JIT compiler's total time in seconds from ``jcmd <pid> PerfCounter.print``'s
    output (``java.ci.totalTime`` in ticks of ``sun.os.hrt.frequency`` per second); None
    when either counter is missing."""
    found = dict(re.findall(r"^(java\.ci\.totalTime|sun\.os\.hrt\.frequency)=(\d+)$",
                            perf_counters, re.M))  # fmt: skip
    if len(found) < 2 or int(found["sun.os.hrt.frequency"]) <= 0:
        return None
    return int(found["java.ci.totalTime"]) / int(found["sun.os.hrt.frequency"])


def broker_pid(bootstrap: str) -> int | None:
    """The local Apache Kafka process listening on ``bootstrap``'s port (an embedded
    broker's command line ends with its properties file); None for any other broker."""
    port = _PORT.search(bootstrap.split(",")[0])
    if port is None:
        return None
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
            if b"kafka.Kafka" not in argv:
                continue
            props = Path(argv[argv.index(b"kafka.Kafka") + 1].decode()).read_text()
        except (OSError, IndexError, ValueError):
            continue
        if re.search(rf"PLAINTEXT://127\.0\.0\.1:{port.group(1)}\b", props):
            return int(d.name)
    return None


def jit_seconds(pid: int | None) -> float | None:
    """The broker JVM's compile time so far; None without the process or ``jcmd``."""
    if pid is None or shutil.which("jcmd") is None:
        return None
    try:
        out = subprocess.run(
            ["jcmd", str(pid), "PerfCounter.print"], capture_output=True, text=True, timeout=20
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_jit_seconds(out)


@dataclass
class WarmUp:
    """What ``warm_broker`` did: seconds spent, records moved, the compiler's seconds over
    it (None: not readable), and whether it ended quiet."""

    seconds: float
    records: int
    jit_s: float | None
    quiet: bool


def warm_broker(
    bootstrap: str, max_s: float = 180.0, step_s: float = WARM_STEP_S, rate: float = 8000.0
) -> WarmUp:
    """Records through two throwaway topics in steps of ``step_s`` (the engines' request
    mix: two idempotent producers writing both topics, a group consumer committing, an
    assigned one with a short fetch wait, partition ends asked for), until a step's
    compile time has been under ``WARM_QUIET`` of it ``WARM_QUIET_STEPS`` times in a row,
    or ``max_s``. Without a readable JIT counter it runs ``max_s``."""
    tag = f"warm-{uuid.uuid4().hex[:8]}"
    topics = [f"{tag}.a", f"{tag}.b"]
    ensure_topics(bootstrap, topics, partitions=WARM_PARTITIONS)
    pid = broker_pid(bootstrap)
    conf = {"bootstrap.servers": bootstrap}
    producers = [Producer({**conf, "linger.ms": 5, "enable.idempotence": True}) for _ in "ab"]
    grouped = Consumer({**conf, "group.id": tag, "auto.offset.reset": "earliest"})
    grouped.subscribe([topics[0]])
    assigned = Consumer({**conf, "group.id": f"{tag}-assigned", "fetch.wait.max.ms": 50})
    assigned.assign([TopicPartition(topics[1], j, 0) for j in range(WARM_PARTITIONS)])
    t0, jit0 = time.monotonic(), jit_seconds(pid)
    moved, quiet = 0, 0
    try:
        while time.monotonic() - t0 < max_s and quiet < WARM_QUIET_STEPS:
            before = jit_seconds(pid)
            moved += _step(producers, [grouped, assigned], topics, step_s, rate)
            quiet = quiet + 1 if _quiet(before, jit_seconds(pid), step_s) else 0
    finally:
        grouped.close()
        assigned.close()
    end = jit_seconds(pid)
    spent = None if jit0 is None or end is None else round(end - jit0, 2)
    done = WarmUp(round(time.monotonic() - t0, 1), moved, spent, quiet >= WARM_QUIET_STEPS)
    print(f"broker warm-up: {done}", file=sys.stderr, flush=True)
    return done


def _quiet(before: float | None, after: float | None, step_s: float) -> bool:
    return before is not None and after is not None and after - before < WARM_QUIET * step_s


def _step(
    producers: list[Producer],
    consumers: list[Consumer],
    topics: list[str],
    seconds: float,
    rate: float,
) -> int:
    """``rate`` records a second for ``seconds``, spread over the producers, topics and
    partitions, each read back meanwhile; then every partition's ends, once."""
    body = b'{"warm": "' + b"x" * 160 + b'"}'
    t0, sent, got = time.monotonic(), 0, 0
    while (now := time.monotonic()) - t0 < seconds:
        due = int((now - t0) * rate) - sent
        for k in range(sent, sent + max(0, due)):
            producer = producers[k % len(producers)]
            producer.produce(topics[k // 2 % 2], body, partition=k // 4 % WARM_PARTITIONS)
        sent += max(0, due)
        for producer in producers:
            producer.poll(0)
        got += sum(len(c.consume(num_messages=1000, timeout=0.005)) for c in consumers)
    for producer in producers:
        producer.flush(10)
    for topic in topics:
        for j in range(WARM_PARTITIONS):
            consumers[1].get_watermark_offsets(TopicPartition(topic, j), timeout=10)
    return sent + got


def add_warm_flag(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--broker-warm-s",
        type=float,
        default=180.0,
        help="before the first run, warm the broker until its JIT is quiet, at most this "
        "long (0: not)",
    )
    ap.add_argument(
        "--warm-runs",
        type=int,
        default=0,
        help="unmeasured rounds of every peer before the measured ones (their rows printed "
        "with a negative run, not summed): the broker's JIT on the engines' own requests",
    )


def ready_broker(bootstrap: str, warm_s: float) -> int | None:
    """The shared broker warmed (``warm_s`` > 0), and its pid for ``run_all``'s JIT
    figures (None: not a local Apache Kafka)."""
    if warm_s > 0:
        warm_broker(bootstrap, max_s=warm_s)
    return broker_pid(bootstrap)
