"""LAS sketches through a real redis-server, operator and shedder in two processes."""

import subprocess
import sys
import time

import numpy as np
import pytest

from elastic_sps.io.knowledge_base import Keys
from elastic_sps.las.redis_store import SketchPublisher, SketchSubscriber
from elastic_sps.las.shedder import AverageQueuingLatency, LasShedder
from elastic_sps.las.sketch import Hashes, SketchPair

pytestmark = pytest.mark.integration

OPERATOR_SCRIPT = """
import sys, time
import numpy as np, redis
from elastic_sps.las.operator_side import LasOperator
from elastic_sps.las.redis_store import SketchPublisher
r = redis.Redis.from_url(sys.argv[1])
pub = SketchPublisher(r, "classify")
op = LasOperator(pub.publish_sketch, pub.send_delta, window=512, seed=7)
rng = np.random.default_rng(7)
for phase_ms in (1.0, 4.0):  # durations change: a new stable sketch must follow
    keys = rng.integers(0, 100, size=4096)
    op.update_batch(keys, np.full(len(keys), phase_ms / 1000) * (1 + keys % 3))
    time.sleep(0.2)
print(op.sketches_sent, pub.messages, flush=True)
"""


def pair(rows=2, cols=8, seed=0):
    p = SketchPair.empty(Hashes.draw(rows, cols, seed))
    p.update(np.array([1, 2, 3]), np.array([0.001, 0.002, 0.003]))
    return p


def test_shedder_picks_up_each_new_version_from_another_process(redis_url, redis_client):
    sub = SketchSubscriber(redis_client, "classify")
    shedder = LasShedder(AverageQueuingLatency(0.01))
    proc = subprocess.Popen(
        [sys.executable, "-c", OPERATOR_SCRIPT, redis_url], stdout=subprocess.PIPE, text=True
    )
    seen = []
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        if (new := sub.poll()) is not None:
            shedder.receive_sketch(new)
            seen.append((sub.version, float(new.estimate(np.array([5]))[0])))
        time.sleep(0.01)
    out = proc.communicate(timeout=30)[0].split()
    if (new := sub.poll()) is not None:
        shedder.receive_sketch(new)
        seen.append((sub.version, float(new.estimate(np.array([5]))[0])))
    sent = int(out[0])
    assert sent >= 2
    assert shedder.sketches_received >= 2
    assert [v for v, _ in seen] == sorted({v for v, _ in seen})  # versions only move forward
    # The last sketch reflects the slower phase (key 5: 3 ms × (1 + 5 % 3) = 12 ms).
    assert seen[-1][1] == pytest.approx(0.012, rel=0.3)
    assert seen[0][1] < seen[-1][1]


def test_bad_state_in_redis_is_ignored_and_last_good_kept(redis_client, caplog):
    keys = Keys()
    pub = SketchPublisher(redis_client, "op")
    sub = SketchSubscriber(redis_client, "op")
    pub.publish_sketch(pair())
    good = sub.poll()
    assert good is not None
    k = keys.las_sketch("op")
    # truncated matrices
    pub.publish_sketch(pair())
    redis_client.hset(k, "F", b"\x00" * 5)
    assert sub.poll() is None
    # wrong shape
    pub.publish_sketch(pair())
    redis_client.hset(k, mapping={"rows": 3})
    assert sub.poll() is None
    # unknown format version
    pub.publish_sketch(pair())
    redis_client.hset(k, "format", 99)
    assert sub.poll() is None
    assert sub.rejected == 3
    assert "ignored" in caplog.text
    # a good one again is taken
    pub.publish_sketch(pair(seed=3))
    assert sub.poll() is not None


def test_redis_traffic_is_order_m_over_n(redis_client):
    """Theorem 3.3 on the wire: count the operator's commands at the server."""
    from elastic_sps.las.operator_side import LasOperator

    redis_client.config_resetstat()
    pub = SketchPublisher(redis_client, "op")
    op = LasOperator(pub.publish_sketch, pub.send_delta, window=1024, seed=1)
    m = 65536
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 500, size=m)
    op.update_batch(keys, 0.001 * (1 + keys % 5))
    stats = redis_client.info("commandstats")
    writes = sum(
        stats.get(f"cmdstat_{c}", {}).get("calls", 0) for c in ("hset", "hincrby", "rpush")
    )
    assert pub.messages >= 1
    assert writes <= 3 * m / 1024


def test_delta_replies_name_their_probe_and_bad_ones_are_skipped(redis_client, caplog):
    keys = Keys("t-delta")
    pub = SketchPublisher(redis_client, "parse", keys)
    pub.send_delta(0.25, tag="tweet 42")  # a tag may hold spaces: Δ is the last field
    pub.send_delta(-0.5)
    redis_client.rpush(keys.las_deltas("parse"), b"ev-9 not-a-number", b"ev-10 inf")
    pub.send_delta(1.0, tag="ev-11")
    sub = SketchSubscriber(redis_client, "parse", keys)
    assert sub.deltas() == [("tweet 42", 0.25), (None, -0.5), ("ev-11", 1.0)]
    assert sum("ignored" in r.getMessage() for r in caplog.records) == 2
    assert sub.deltas() == []
