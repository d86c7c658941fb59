"""The PySpark dataplane against a real broker and redis-server: resize while running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest
import redis
from sps_twitter import operators as twitter

from elastic_sps.contracts.plan import PlanRecord
from elastic_sps.io import id_ledger, rescale_timeline
from elastic_sps.io.embedded import free_port
from elastic_sps.io.envelope import Envelope
from elastic_sps.io.kafka_io import read_topic as read_all
from elastic_sps.io.knowledge_base import Keys, KnowledgeBase
from elastic_sps.io.tracked_producer import TrackedProducer
from elastic_sps.model import topology
from elastic_sps.services.execute.core import Executor

pytestmark = pytest.mark.integration


DOWNSTREAM = ("classify_content", "classify_author", "store")


def _wait_for_batch(r: redis.Redis, log: str, active: int, proc, tmp_path) -> None:
    deadline = time.monotonic() + 180
    while True:
        last = r.lindex(log, -1)
        if last is not None and json.loads(last)["active"] == active:
            return
        assert proc.poll() is None, (tmp_path / "job.log").read_text()[-3000:]
        assert time.monotonic() < deadline, f"no micro-batch planned with {active} replicas"
        time.sleep(0.2)


# Each step waits for a micro-batch planned with its count (the planning is what this
# test checks), so epochs end every 2 s here, not at the default's length: on two cores
# the four operators' queries take turns (in the local cluster each batch's two tasks
# fill both), so a step waited up to four epochs for its batch (20 s at 5 s).
LOCAL = {"SPS_SPARK_MASTER": "auto", "SPS_TASK_WINDOW_S": "2"}
# Two executor JVMs with one core each, their own Python workers; two tasks per operator
# per micro-batch, so a batch of the 4-replica step spreads over both executors.
CLUSTER = {**LOCAL, "SPS_SPARK_MASTER": "local-cluster[2,1,1024]", "SPS_TASKS_PER_QUERY": "2"}


@pytest.mark.parametrize(
    "spark",
    [
        pytest.param(LOCAL, id="local"),
        pytest.param(CLUSTER, id="local-cluster", marks=pytest.mark.cluster),
        # by default tasks read past their planned range for SPS_TASK_WINDOW_S (nothing may
        # be processed twice); without the window each reads its planned range only
        pytest.param({**LOCAL, "SPS_TASK_WINDOW_S": "0"}, id="planned-range"),
    ],
)
def test_resize_mid_stream_loses_nothing_and_never_restarts(
    kafka_bootstrap, redis_url, tmp_path, spark
):
    tag = uuid.uuid4().hex[:6]
    keys = Keys(tag)
    topics = {
        f"SPS_TOPICS__{k.upper()}": f"{tag}.{v}"
        for k, v in {"metrics": "sps.metrics", "deadletter": "sps.deadletter"}.items()
    }
    web_port = free_port()
    env = {
        **os.environ,
        "SPS_WEB_PORT": str(web_port),
        "SPS_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "SPS_REDIS_URL": redis_url,
        "SPS_KEY_PREFIX": tag,
        "SPS_TRACK_IDS": "true",
        "SPS_TOPOLOGY": "twitter",
        "SPS_ADMISSION": "ingress",  # the test feeds the entry operator's topic itself
        "SPS_CHECKPOINT_DIR": str(tmp_path / "ckpt"),
        **topics,
        **spark,
    }
    r = redis.Redis.from_url(redis_url)
    # Operator topics are shared by name across runs; a fresh prefix gives fresh ends, so
    # start from whatever the broker holds: record current ends as the starting point.
    log = (tmp_path / "job.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "elastic_sps.services.dataplane"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 300  # a cluster starts its executor JVMs first
        while not KnowledgeBase(r, tag).runs():
            assert proc.poll() is None, (tmp_path / "job.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "dataplane did not start"
            time.sleep(0.5)
        producer = TrackedProducer(kafka_bootstrap, r, keys)
        n, sent = 10_000, 0
        schedule = [1, 4, 2, 1]
        tweets = list(twitter.generate(n, seed=1))
        executor = Executor(r, topology.load("twitter"), keys)
        for step, active in enumerate(schedule):
            now = time.time()
            target = {"classify_content": active}
            plan = PlanRecord(
                plan_id=f"step-{step}", interval=0, targets=target, closed_at=now, decided_at=now
            )
            assert executor.apply(plan).status == "applied"
            for k in range(step * n // 4, (step + 1) * n // 4):
                tw = tweets[k]
                env_ = Envelope(f"{tag}-{k}", time.time(), "source", tw)
                producer.produce(
                    keys.topic("parse"),
                    env_.encode(),
                    partition=0,
                    key=tw["user"]["screen_name"].encode(),
                )
                sent += 1
            producer.produce(keys.topic("parse"), b"{broken", partition=0)
            producer.flush()
            # Event-driven, not a sleep: the next step starts once a micro-batch of
            # classify_content has been planned with this step's active count.
            _wait_for_batch(r, Keys(tag).batches("classify_content"), active, proc, tmp_path)
        deadline = time.monotonic() + 180
        at_sink = id_ledger.key(keys.prefix, "store", "processed")
        while r.scard(at_sink) < n and time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "job.log").read_text()[-3000:]
            time.sleep(0.5)
        ids = id_ledger.completed_ids(r, keys.prefix, ["store"])
        missing = {f"{tag}-{k}" for k in range(n)} - ids
        assert not missing, f"{len(missing)} events never reached the sink"
        # by id, per stage: what each operator was sent it processed (nothing expires, the
        # broken records never got an id), so a loss between two operators would show
        accounts = id_ledger.stage_accounts(r, keys.prefix, ["parse", *DOWNSTREAM])
        assert accounts[0].processed == n
        for a in accounts[1:]:
            assert (a.sent, a.processed, a.lost, a.expired, a.dead) == (n, n, 0, 0, 0), a
        batches = KnowledgeBase(r, tag).batches("classify_content")
        # every micro-batch served exactly the active replicas' slots (plus the inactive
        # ones: drains, or with epochs standbys), packed into at most one Spark task
        assert all(b["slots"] == list(range(b["active"])) for b in batches)
        assert all(
            min(b["drain"] + b["standby"], default=b["active"]) >= b["active"] for b in batches
        )
        tasks = int(spark.get("SPS_TASKS_PER_QUERY", "1"))
        assert all(b["tasks"] <= tasks for b in batches)
        # each task's span (start, end, planned records found waiting), after its planning
        spans = KnowledgeBase(r, tag).tasks("classify_content")
        assert spans and all(float(a) <= float(b) and int(n) >= 0 for a, b, n in spans)
        assert float(spans[0][0]) >= batches[0]["at"]
        assert sum(int(n) for _, _, n in spans) <= n
        seen = [b["active"] for b in batches]
        compact = [a for k, a in enumerate(seen) if k == 0 or seen[k - 1] != a]
        assert compact[:4] == schedule, compact
        # the rescale timeline: each change, decided -> applied -> first batch with it
        changes = [c for c in rescale_timeline.read(r, keys) if c.operator == "classify_content"]
        assert [(c.before, c.after) for c in changes] == [(0, 1), (1, 4), (4, 2), (2, 1)]
        assert all(c.decided_at <= c.applied_at <= c.effect_at for c in changes), changes
        executors = set()
        for op in ("parse", *DOWNSTREAM):
            executors |= KnowledgeBase(r, tag).executors(op)
        assert len(executors) == (2 if spark is CLUSTER else 1), executors
        # its /metrics counts what the replicas did, per operator; /health says it runs
        page = urllib.request.urlopen(f"http://127.0.0.1:{web_port}/metrics", timeout=5)
        metrics = page.read().decode()
        for op in ("parse", *DOWNSTREAM):
            assert f'sps_dataplane_processed_total{{operator="{op}"}} {float(n)}' in metrics, op
        assert 'sps_dataplane_dead_lettered_total{operator="parse"} 4.0' in metrics
        assert "sps_rescale_decision_to_effect_seconds_count 4.0" in metrics
        assert urllib.request.urlopen(f"http://127.0.0.1:{web_port}/health").status == 200
        # the queries ran once: one run record, still the same process
        assert KnowledgeBase(r, tag).runs() == 1
        assert proc.poll() is None
        dead = read_all(kafka_bootstrap, topics["SPS_TOPICS__DEADLETTER"])
        assert sum(1 for d in dead if d["service"] == "dataplane:parse") == len(schedule)
    finally:
        proc.terminate()
        proc.wait(60)
