"""The four MAPE services as separate processes over a real broker and redis-server."""

from __future__ import annotations

import json
import math
import signal
import time

import pytest
from confluent_kafka import Producer

from elastic_sps.contracts.metrics import OperatorCounters
from elastic_sps.io.kafka_admin import ensure_topics, wait_groups_stable
from elastic_sps.io.kafka_io import read_topic
from elastic_sps.io.knowledge_base import Keys
from elastic_sps.io.topics import Topics
from elastic_sps.model import topology
from elastic_sps.services.ensemble.joins import JOIN_WAIT_S, control_groups
from tests.support.processes import ServiceProcess
from tests.support.recorded import chain_interval
from tests.support.service_env import service_env

pytestmark = pytest.mark.integration

OPS = ["parse", "classify_content", "classify_author", "store"]


def counters(interval: int, rate: float) -> list[OperatorCounters]:
    """A recorded interval of the Twitter application at ``rate`` events/s, all processed,
    each operator as busy per event as its declared et (PA-SPS sizes with the larger)."""
    et = {op.name: op.et_s for op in topology.load("twitter").operators}
    return chain_interval(OPS, interval, rate, et_s=et, sink_latency_ms=[5.0, 7.0])


def read_all(bootstrap: str, topic: str, timeout: float = 2.0, max_s: float = 20.0) -> list[dict]:
    return read_topic(bootstrap, topic, timeout, max_s)


def run_env(bootstrap: str, redis_url: str, **extra: str) -> tuple[str, Topics, dict[str, str]]:
    """A fresh prefix and topic names, so a test never reads another's records."""
    tag, topics, env = service_env(
        bootstrap, redis_url, SPS_TD="1", SPS_TOPOLOGY="twitter", **extra
    )
    ensure_topics(bootstrap, topics.control())
    return tag, topics, env


def wait_joined(bootstrap: str, topics: Topics, services: list[str]) -> None:
    """Until the services' consumer groups hold their topics (``up`` waits so too): a
    record produced before would wait for the join. The groups are named per service,
    not per test, and a member an earlier test left holds its own topics, not these."""
    wait_groups_stable(bootstrap, control_groups(topics, services), JOIN_WAIT_S)


@pytest.fixture
def ensemble(kafka_bootstrap, redis_url, redis_client):
    # the paper's PA-SPS as written (no stabiliser): the counts below are Eq. 2's
    tag, topics, env = run_env(
        kafka_bootstrap, redis_url, SPS_PREDICTOR="basic", SPS_STABILISER="none"
    )
    procs = {n: ServiceProcess(n, env).start() for n in ("monitor", "analyze", "plan", "execute")}
    try:
        for p in procs.values():
            p.wait_healthy()
        wait_joined(kafka_bootstrap, topics, list(procs))
        yield procs, topics, Keys(tag), env
    finally:
        for p in procs.values():
            p.stop()


def test_spike_scales_out_then_in_and_bad_records_are_dead_lettered(
    ensemble, kafka_bootstrap, redis_client
):
    procs, topics, keys, env = ensemble
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "batch.num.messages": 1})
    base = math.floor(time.time()) + 30  # future intervals: closed by the next record
    rates = [300.0] * 6 + [1500.0] * 4 + [300.0] * 8
    for k, rate in enumerate(rates):
        for rec in counters(base + k, rate):
            producer.produce(topics.metrics, key=rec.operator, value=rec.model_dump_json())
        if k == 9:
            # Kill execute mid-run and bring it back: no plan may be applied twice.
            producer.flush()
            time.sleep(3)
            procs["execute"].stop(signal.SIGKILL)
            procs["execute"] = ServiceProcess("execute", env).start()
            procs["execute"].wait_healthy()
    for topic in (topics.metrics, topics.stats, topics.analysis, topics.plans, topics.requests):
        producer.produce(topic, value=b"{not json")
        producer.produce(topic, value=json.dumps({"schema_name": "bogus", "version": 1}))
    producer.flush()

    deadline = time.monotonic() + 90
    actions: list[dict] = []
    while time.monotonic() < deadline:
        actions = read_all(kafka_bootstrap, topics.actions)
        ids = {a["plan_id"] for a in actions}
        if f"interval-{base + len(rates) - 2}" in ids:
            break
        time.sleep(1)
    applied = [a for a in actions if a["status"] == "applied"]
    by_interval = {int(a["plan_id"].split("-")[1]) - base: a["targets"] for a in applied}
    assert by_interval, f"no actions: {procs['execute'].log.read_text()[-1500:]}"
    # within two intervals of the spike, the heavy operators have more replicas
    early = [by_interval[k] for k in (6, 7) if k in by_interval]
    assert any(t["classify_content"] >= 4 and t["store"] >= 2 for t in early), by_interval
    assert all(t["parse"] == 1 for t in by_interval.values())
    # after the spike they come back down
    late = [by_interval[k] for k in sorted(by_interval) if k >= 13]
    assert late and late[-1]["classify_content"] == 1
    assert int(redis_client.get(keys.active("classify_content"))) == 1
    # no plan applied twice across the restart
    ids = [a["plan_id"] for a in applied]
    assert len(ids) == len(set(ids))
    assert redis_client.zcard(keys.applied_plans) == len(set(ids))
    # every malformed record reached the dead-letter topic, and the services still run
    dead = read_all(kafka_bootstrap, topics.deadletter)
    for topic in (topics.metrics, topics.stats, topics.analysis, topics.plans, topics.requests):
        reasons = [d["reason"] for d in dead if d["topic"] == topic]
        assert len(reasons) >= 2, (topic, dead)
        assert any("not JSON" in r for r in reasons)
    assert all(p.alive() for p in procs.values())
    assert "sps_dead_lettered_total" in procs["monitor"].metrics()
    # every plan is explained per operator: the spike's scale-out with PA-SPS's inputs
    decided = [d for d in read_all(kafka_bootstrap, topics.decisions) if "operator" in d]
    spike = [
        d
        for d in decided
        if d["operator"] == "classify_content" and d["chosen"] >= 4 and d["current"] < 4
    ]
    assert spike, decided[-8:]
    d = spike[0]
    assert d["rule"].startswith("PA-SPS Eq. 2") and d["asked"] == d["chosen"]
    assert {"predicted_input", "theta", "queue", "et_ms"} <= set(d["inputs"])
    assert d["pool"] == [1, topology.load("twitter")["classify_content"].max_replicas]


def test_dry_run_decides_and_explains_but_changes_no_count(
    kafka_bootstrap, redis_url, redis_client
):
    from elastic_sps.contracts.analysis import OperatorNeed
    from tests.support.records import analysis_record

    tag, topics, env = run_env(kafka_bootstrap, redis_url, SPS_DRY_RUN="true")
    procs = [ServiceProcess(n, env).start() for n in ("plan", "execute")]
    try:
        for p in procs:
            p.wait_healthy()
        wait_joined(kafka_bootstrap, topics, ["plan", "execute"])
        need = OperatorNeed(replicas=3, current=1, raw_replicas=2.4)
        rec = analysis_record(7, dict.fromkeys(OPS, need), "pa-sps", 900, time.time())
        producer = Producer({"bootstrap.servers": kafka_bootstrap})
        producer.produce(topics.analysis, value=rec.model_dump_json())
        producer.flush()
        deadline = time.monotonic() + 60
        actions: list[dict] = []
        while not actions and time.monotonic() < deadline:
            actions = read_all(kafka_bootstrap, topics.actions)
        assert [a["status"] for a in actions] == ["dry-run"]
        assert actions[0]["targets"] == dict.fromkeys(OPS, 3)
        for op in OPS:  # execute wrote nothing but its bootstrap counts
            assert int(redis_client.get(Keys(tag).active(op))) == 1
        decided = read_all(kafka_bootstrap, topics.decisions)
        assert {d["operator"] for d in decided} == set(OPS)
        assert all(d["dry_run"] and d["chosen"] == 3 for d in decided)
    finally:
        for p in procs:
            p.stop()
