"""A SIGTERM to the dataplane's driver in the middle of an epoch (what ``docker stop`` and
``elastic-sps up`` send it), on real Spark, a real broker and redis-server: the epoch ends
at once and commits, the process exits, and the next start goes on from there, so every
event's output is produced once. The replicas commit only at an epoch's end here
(``SPS_CHECKPOINT_S=0``), so a stop that did not let them commit would repeat every
output of the epoch."""

from __future__ import annotations

import signal
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
import redis
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition

from elastic_sps.io.connections import kafka_config
from elastic_sps.io.envelope import decode
from elastic_sps.io.knowledge_base import Keys
from elastic_sps.io.watermarks import is_declaration
from elastic_sps.model import topology
from elastic_sps.services.dataplane.job import create_topics
from elastic_sps.services.dataplane.stopping import StopRequest, end_epochs
from elastic_sps.settings import DataplaneSettings
from tests.support.processes import ServiceProcess
from tests.support.step_after import step_after

pytestmark = pytest.mark.integration

EVENTS = 2_000  # per run


class Outputs:
    """What one topic received, read as it comes: how many times each event id was
    produced, and the record values (an operator topic's envelopes, or an ``output:``
    topic's ``{"id", "value"}`` records)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, envelopes: bool) -> None:
        self.consumer = Consumer(kafka_config(bootstrap, **{"group.id": f"g{uuid.uuid4()}"}))
        self.consumer.assign([TopicPartition(topic, j, 0) for j in range(partitions)])
        self.envelopes = envelopes
        self.ids: Counter[str] = Counter()
        self.values: list[Any] = []

    def read(self) -> Counter[str]:
        while (msg := self.consumer.poll(0.2)) is not None:
            if msg.error() is not None or is_declaration(msg.value()):
                continue
            if self.envelopes:
                self.ids[decode(msg.value()).id] += 1
            else:
                record = orjson.loads(msg.value())
                self.ids[record["id"]] += 1
                self.values.append(record["value"])
        return self.ids

    def wait_for(self, n: int, proc: ServiceProcess, timeout_s: float = 180) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.read()) < n:
            assert proc.alive(), proc.log.read_text()[-3000:]
            assert time.monotonic() < deadline, f"{len(self.ids)} of {n} events out"


def produce(bootstrap: str, topic: str, ids: range) -> None:
    producer = Producer(kafka_config(bootstrap))
    for k in ids:
        body = orjson.dumps({"id": f"e{k}", "key": f"k{k % 7}", "t": k // 100, "sum": k})
        producer.produce(topic, body, partition=k % 2)
    producer.flush(10)


def stop_gracefully(proc: ServiceProcess) -> None:
    """SIGTERM to the driver's process alone, as ``docker stop`` sends it."""
    assert proc.proc is not None
    proc.proc.send_signal(signal.SIGTERM)
    assert proc.proc.wait(60) == 0, proc.log.read_text()[-3000:]
    assert "every epoch ended and committed" in proc.log.read_text()
    proc.stop(signal.SIGKILL)  # what is left of its group (Spark's JVM)


def fanned_out(out: str) -> dict[str, Any]:
    """``step`` (relabels; the entry operator), fanned out to ``after`` (kept apart: its
    topic carries ``step``'s outputs) and to two keyed stages apart (a Kafka hop between
    them), each numbering its key's events: the second's numbers reach ``out``. One
    pipeline for both stop tests: each dataplane run boots Spark (~15 s)."""
    ops = "tests.support.engine_ops"
    keyed = {"key": "field:key", "et_ms": 0.1, "max_replicas": 2, "chain": False,
             "code": f"{ops}:count_seen"}  # fmt: skip
    doc = step_after()
    return {
        "operators": [
            *doc["operators"],
            {"name": "first", **keyed},
            {"name": "second", **keyed, "output": out},
        ],
        "edges": [
            *doc["edges"],
            {"from": "step", "to": "first"},
            {"from": "first", "to": "second"},
        ],
    }


@dataclass
class Stopped:
    """What two runs, each stopped by a SIGTERM, left: ``step``'s outputs (``after``'s
    topic), the second keyed stage's (``out``), and the source's progress committed
    after each run."""

    after: Outputs
    out: Outputs
    committed: list[dict[int, int]]


@pytest.fixture(scope="module")
def stopped(kafka_bootstrap: str, redis_url: str, tmp_path_factory: Any) -> Stopped:
    """Two runs of ``EVENTS`` new events each, each stopped by a SIGTERM once its
    events' outputs are out on both topics; the source's progress each run committed,
    by hand."""
    tmp_path = tmp_path_factory.mktemp("graceful")
    tag = f"gs{uuid.uuid4().hex[:6]}"
    out = f"{tag}.out"
    got = Stopped(
        Outputs(kafka_bootstrap, Keys(tag).topic("after"), 2, envelopes=True),
        Outputs(kafka_bootstrap, out, 1, envelopes=False),
        [],
    )
    source = {"topics": [f"{tag}.orders"], "format": "json", "id": "field:id",
              "key": "field:key", "time": "field:t"}  # fmt: skip
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump({**fanned_out(out), "source": source, "name": tag}))
    env: dict[str, Any] = {
        "SPS_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "SPS_REDIS_URL": redis_url,
        "SPS_KEY_PREFIX": tag,
        "SPS_TOPOLOGY": str(path),
        "SPS_ADMISSION": "entry",
        "SPS_CHECKPOINT_DIR": str(tmp_path / "checkpoints"),
        "SPS_TOPICS__DEADLETTER": f"{tag}.dead",
        "SPS_TOPICS__METRICS": f"{tag}.metrics",
        # one epoch outlasts each run, committing only at its end
        "SPS_TASK_WINDOW_S": "600",
        "SPS_CHECKPOINT_S": "0",
    }
    settings = DataplaneSettings(
        kafka_bootstrap_servers=kafka_bootstrap, redis_url=redis_url, key_prefix=tag,
        admission="entry",
    )  # fmt: skip
    create_topics(settings, topology.load(path))  # the source: a partition per replica
    r = redis.Redis.from_url(redis_url)
    for run in range(2):
        dataplane = ServiceProcess("dataplane", env).start()
        try:
            dataplane.wait_healthy(240)
            produce(kafka_bootstrap, source["topics"][0], range(run * EVENTS, (run + 1) * EVENTS))
            got.after.wait_for((run + 1) * EVENTS, dataplane)
            got.out.wait_for((run + 1) * EVENTS, dataplane)
            stop_gracefully(dataplane)
        finally:
            dataplane.stop(signal.SIGKILL)
        got.committed.append(
            {int(j): int(v) for j, v in r.hgetall(Keys(tag).committed("step")).items()}
        )
    for outputs in (got.after, got.out):
        outputs.read()
        outputs.consumer.close()
    return got


def assert_each_run_committed_its_end(got: Stopped) -> None:
    """The epoch's only commit was the stop's: each source partition read to its end."""
    assert got.committed == [
        {0: (run + 1) * EVENTS // 2, 1: (run + 1) * EVENTS // 2} for run in range(2)
    ]


def assert_each_id_once(outputs: Outputs) -> None:
    assert set(outputs.ids) == {f"e{k}" for k in range(2 * EVENTS)}
    assert [i for i, n in outputs.ids.items() if n > 1] == []


def test_a_sigterm_mid_epoch_repeats_no_output(stopped: Stopped) -> None:
    assert_each_run_committed_its_end(stopped)
    assert_each_id_once(stopped.after)


def test_a_sigterm_mid_epoch_applies_each_event_once_in_two_keyed_stages(
    stopped: Stopped,
) -> None:
    """4,000 events over keys k0..k6 (event k: key k mod 7, so k0-k2 get 572 and k3-k6
    571; e13's sum of 13 relabels it to k6'): each id out once, and the second stage
    numbered each key's events 1..its count."""
    assert_each_run_committed_its_end(stopped)
    assert_each_id_once(stopped.out)
    numbers: dict[str, list[int]] = {}
    for v in stopped.out.values:
        numbers.setdefault(v["key"], []).append(v["n"])
    counts = {"k0": 572, "k1": 572, "k2": 572, "k3": 571, "k4": 571, "k5": 571, "k6": 570}
    counts["k6'"] = 1
    assert {key: sorted(ns) for key, ns in numbers.items()} == {
        key: list(range(1, n + 1)) for key, n in counts.items()
    }


class BatchUnderWay:
    """Stands in for a Spark query (``isActive``, ``status``): inside a trigger for the
    first ``reads`` reads of its status."""

    isActive = True

    def __init__(self, reads: int) -> None:
        self.left, self.asked = reads, 0

    @property
    def status(self) -> dict[str, bool]:
        self.asked += 1
        self.left -= 1
        return {"isTriggerActive": self.left >= 0}


def test_the_stop_waits_for_the_batch_under_way(redis_client: Any) -> None:
    keys = Keys(f"gs{uuid.uuid4().hex[:6]}")
    query = BatchUnderWay(3)
    assert end_epochs(redis_client, keys, "host:1:a", [query], grace_s=30, poll_s=0.01)
    assert query.asked == 4  # three inside the batch, then between triggers
    assert redis_client.exists(keys.dataplane_stopping("host:1:a"))
    assert not redis_client.exists(keys.dataplane_stopping("host:2:b"))


def test_the_stop_gives_up_after_its_grace(redis_client: Any) -> None:
    keys = Keys(f"gs{uuid.uuid4().hex[:6]}")
    began = time.monotonic()
    assert not end_epochs(redis_client, keys, "h", [BatchUnderWay(10**9)], 0.3, poll_s=0.05)
    assert 0.3 <= time.monotonic() - began < 10


def test_with_overlaps_the_stop_waits_for_the_holders_windows_alone(redis_client: Any) -> None:
    keys = Keys(f"gs{uuid.uuid4().hex[:6]}")
    redis_client.set(keys.overlap("op", 0), "h|t1", px=300)  # h's window, ending soon
    redis_client.set(keys.overlap("op", 1), "other|t2", ex=60)  # another holder's
    assert end_epochs(redis_client, keys, "h", [BatchUnderWay(1)], 30, 0.01, overlaps=True)
    assert not redis_client.exists(keys.overlap("op", 0))  # it waited for h's to go
    assert redis_client.exists(keys.overlap("op", 1))
    redis_client.set(keys.overlap("op", 0), "h|t3", ex=60)
    assert end_epochs(redis_client, keys, "h", [BatchUnderWay(1)], 30, 0.01)  # overlaps off
    assert redis_client.exists(keys.overlap("op", 0))  # no window looked for


def test_without_redis_the_stop_does_not_wait() -> None:
    import redis

    from elastic_sps.io.embedded import free_port

    gone = redis.Redis(port=free_port(), socket_connect_timeout=1)  # nothing listens
    query = BatchUnderWay(10**9)
    assert not end_epochs(gone, Keys("gs"), "h", [query], grace_s=30)
    assert query.asked == 0


def test_sigterm_asks_once_while_serving_else_exits() -> None:
    stop = StopRequest()
    with pytest.raises(SystemExit) as first:  # starting, or a standby waiting: nothing to end
        stop(signal.SIGTERM, None)
    assert first.value.code == 0
    stop.graceful = True
    stop(signal.SIGTERM, None)
    assert stop.requested
    with pytest.raises(SystemExit) as second:  # a second one: at once, as killed by it
        stop(signal.SIGTERM, None)
    assert second.value.code == 143
