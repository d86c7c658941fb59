"""What a checkpoint publishes when Redis fails or another attempt overtook it, on a real
redis-server and broker: a keyed partition's counters go with its state commit
(``publishing.commit_state``), so its events are counted once, by the attempt whose
commit is applied (in the knowledge base and on the metrics topic), and a failure after
the commit loses none; a stateless partition's watermarks that a failed pipeline did not
write go with its next write."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
import redis
import yaml
from confluent_kafka import Consumer, TopicPartition

from elastic_sps.contracts.metrics import OperatorCounters
from elastic_sps.io.connections import kafka_config
from elastic_sps.io.envelope import Envelope
from elastic_sps.io.knowledge_base import Keys, KnowledgeBase
from elastic_sps.io.marks import read_marks
from elastic_sps.io.state_store import PartitionStore
from elastic_sps.io.watermarks import InputMark
from elastic_sps.model import topology
from elastic_sps.model.keyed import key_group
from elastic_sps.services.dataplane.committing import cut_results
from elastic_sps.services.dataplane.declaring import Marks
from elastic_sps.services.dataplane.group import GroupRun
from elastic_sps.services.dataplane.options import SourceOptions
from elastic_sps.services.dataplane.publishing import publish
from elastic_sps.services.dataplane.replica import Replica
from elastic_sps.services.dataplane.slots import Slot
from elastic_sps.settings import DataplaneSettings
from tests.support.records import Record

pytestmark = pytest.mark.integration

DOC = {
    "name": "counted",
    "operators": [
        {
            "name": "total",
            "code": "benchmarks.harness.keyed_ops:running_total",
            "key": "field:k",
            "et_ms": 0.1,
            "max_replicas": 1,
        }
    ],
    "edges": [{"from": "source", "to": "total"}],
}


@pytest.fixture
def group(kafka_bootstrap: str, redis_url: str, tmp_path) -> GroupRun:
    # an operator of its own: the metrics topic is shared by every test on the broker
    name = f"total{uuid.uuid4().hex[:6]}"
    doc = {**DOC, "operators": [{**DOC["operators"][0], "name": name}]}
    doc["edges"] = [{"from": "source", "to": name}]
    path = tmp_path / "counted.yaml"
    path.write_text(yaml.safe_dump(doc))
    settings = DataplaneSettings(
        kafka_bootstrap_servers=kafka_bootstrap,
        redis_url=redis_url,
        key_prefix=f"kc{uuid.uuid4().hex[:6]}",
    )
    topo = topology.load(path)
    return GroupRun(SourceOptions.build(settings, topo, [name], "none"), name, 1)


def records(values: list[int]) -> list[Any]:
    """Partition 0's records at offsets 0, 1, ..., key ``a``, adding ``values``."""
    out = []
    for offset, v in enumerate(values):
        body = Envelope(
            f"a-{offset}", time.time(), "source", {"k": "a", "v": v, "sent": 0}
        ).encode()
        out.append(Record(0, offset, body, b"a"))
    return out


def served(g: GroupRun, values: list[int]) -> Replica:
    """An attempt at partition 0 from offset 0 that has handled ``values``."""
    replica = Replica(g, 0)
    replica.serve_planned([Slot(0, 0, len(values), owner=0)], {0: records(values)})
    return replica


def total(g: GroupRun) -> tuple[Any, int | None]:
    store = PartitionStore(g.r, g.keys, g.operator, 0)
    return store.get("s", key_group("a", g.op.key_groups), "a"), store.committed


def test_an_attempt_overtaken_at_its_commit_adds_no_count(group: GroupRun) -> None:
    """A retry and the attempt it retries (a zombie) both handle offsets 0-2: the retry
    commits first, so the zombie's commit is fenced, and the 3 events count 3, not 6."""
    g = group
    retry, zombie = served(g, [5, 7, 11]), served(g, [5, 7, 11])
    publish(g, retry.finish())
    publish(g, zombie.finish())
    assert total(g) == ({"n": 3, "total": 23}, 3)
    assert KnowledgeBase(g.r, Keys(g.keys.prefix)).counts(g.operator)["processed"] == 3
    g.producer.flush()
    assert processed_on_metrics_topic(g) == [3]  # the retry's record alone


def processed_on_metrics_topic(g: GroupRun) -> list[int]:
    """``processed`` of each counters record on the metrics topic, read to its end."""
    topic = g.o.metrics_topic
    consumer = Consumer(kafka_config(g.o.bootstrap, **{"group.id": f"m{uuid.uuid4().hex[:6]}"}))
    end = consumer.get_watermark_offsets(TopicPartition(topic, 0), 10)[1]
    consumer.assign([TopicPartition(topic, 0, 0)])
    out, at, deadline = [], 0, time.monotonic() + 30
    while at < end and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error() is not None:
            continue
        at = msg.offset() + 1
        rec = OperatorCounters.model_validate_json(msg.value())
        if rec.operator == g.operator:
            out.append(rec.processed)
    consumer.close()
    return out


class _Down:
    """A pipeline whose server went away when it runs."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def __len__(self) -> int:
        return len(self.real)

    def execute(self) -> None:
        raise redis.ConnectionError("gone")


def test_a_redis_failure_after_a_checkpoint_commit_loses_no_count(
    group: GroupRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checkpoint's commit is applied, then the pipeline with the rest of what it
    publishes fails: the 2 events are counted, with the state and offset they moved."""
    g = group
    replica = served(g, [1, 2])
    cut = cut_results(list(replica.runs.values()))
    assert cut is not None
    pipeline = g.r.pipeline
    with monkeypatch.context() as m, pytest.raises(redis.ConnectionError):
        m.setattr(g.r, "pipeline", lambda *a, **k: _Down(pipeline(*a, **k)))
        publish(g, cut)
    assert total(g) == ({"n": 2, "total": 3}, 2)
    assert KnowledgeBase(g.r, Keys(g.keys.prefix)).counts(g.operator)["processed"] == 2


def test_marks_a_failed_pipeline_did_not_write_go_with_the_next_write(redis_client) -> None:
    """Input ``up`` moved to 40 and went idle; the pipeline carrying that fails; the next
    write, with the watermark alone moved on to 45, still carries ``up``'s mark."""
    key = f"marks{uuid.uuid4().hex[:6]}"
    marks = Marks(redis_client, key)
    marks.note_marks(40.0, {"up": InputMark(40.0, True, 0)}, {"up"})
    failing = _Down(redis_client.pipeline(transaction=False))
    marks.write(redis_client, failing)
    with pytest.raises(redis.ConnectionError):
        failing.execute()
    marks.note_marks(45.0, {"up": InputMark(40.0, True, 0)}, set())
    pipe = redis_client.pipeline(transaction=False)
    marks.write(redis_client, pipe)
    pipe.execute()
    assert read_marks(redis_client.hgetall(key)) == (45.0, {"up": InputMark(40.0, True, 0)})
