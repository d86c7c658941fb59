"""Capacity of one saturated operator per active replica count, on the real dataplane.

Shared by the integration test (4 replicas ≥ 3× one) and ``benchmarks/bench_capacity.py``
(≥ 0.8 × r × 1/et for r = 1, 2, 4, 8). The operator is an entry and a sink with ``wait``
cost; its queue is filled before it is activated, so it is saturated for the whole
measurement, and the figure is events processed / time from activation to the last id at
the sink.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import redis

from benchmarks.harness.processes import ServiceProcess
from elastic_sps.io import id_ledger
from elastic_sps.io.envelope import Envelope
from elastic_sps.io.knowledge_base import Keys, KnowledgeBase
from elastic_sps.io.tracked_producer import TrackedProducer

OPERATOR = "work"


CPU_CODE = "benchmarks.harness.cpu_work:burn"


def topology_file(folder: Path, et_ms: float, pool: int, code: str = "") -> Path:
    """With ``code``, the operator is that user function and its cost is left out: the
    dataplane measures it at start on a sample file (its CPU share included)."""
    path = folder / "capacity.yaml"
    if code:
        (folder / "samples.jsonl").write_text("".join(f'{{"k": {k}}}\n' for k in range(100)))
        source = "source: {sample_events: samples.jsonl}\n"
        op = f"{{name: {OPERATOR}, code: '{code}', min_replicas: 1, max_replicas: {pool}}}"
    else:
        source = ""
        op = f"{{name: {OPERATOR}, et_ms: {et_ms}, min_replicas: 1, max_replicas: {pool}}}"
    path.write_text(
        f"name: capacity\n{source}operators:\n  - {op}\n"
        f"edges:\n  - {{from: source, to: {OPERATOR}, fraction: 1.0}}\n"
    )
    return path


@dataclass
class CapacityRig:
    bootstrap: str
    redis: redis.Redis
    keys: Keys
    proc: ServiceProcess
    et_ms: float

    def measure(self, replicas: int, seconds: float, deadline_s: float = 300) -> float:
        """Events/s of ``replicas`` active replicas fed ``seconds`` of their capacity."""
        n = max(1, int(replicas * seconds * 1000 / self.et_ms))
        tag = uuid.uuid4().hex[:6]
        producer = TrackedProducer(self.bootstrap, self.redis, self.keys)
        before = self.redis.scard(id_ledger.key(self.keys.prefix, OPERATOR, "processed"))
        self.redis.set(self.keys.active(OPERATOR), replicas)
        # the ingress spreads over the active replicas; so does this feeder
        t0 = time.monotonic()
        for k in range(n):
            body = Envelope(f"{tag}-{k}", time.time(), "source", {"k": k}).encode()
            producer.produce(self.keys.topic(OPERATOR), body, partition=k % replicas)
        producer.flush()
        deadline = t0 + deadline_s
        while self.redis.scard(id_ledger.key(self.keys.prefix, OPERATOR, "processed")) < before + n:
            assert self.proc.alive(), self.proc.log.read_text()[-3000:]
            assert time.monotonic() < deadline, f"{replicas} replicas: not done in {deadline_s}s"
            time.sleep(0.05)
        return n / (time.monotonic() - t0)


@contextmanager
def capacity_rig(
    bootstrap: str,
    redis_url: str,
    folder: Path,
    et_ms: float = 5.0,
    pool: int = 8,
    code: str = "",
) -> Iterator[CapacityRig]:
    """``code``: a user operator doing real work (cost mode none, cost measured at
    start); otherwise a ``wait`` operator of ``et_ms``."""
    prefix = "cap" + uuid.uuid4().hex[:6]
    env = {
        "SPS_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "SPS_REDIS_URL": redis_url,
        "SPS_KEY_PREFIX": prefix,
        "SPS_TOPOLOGY": str(topology_file(folder, et_ms, pool, code)),
        "SPS_TRACK_IDS": "true",
        "SPS_ADMISSION": "ingress",  # the rig feeds the operator's topic as the ingress would
        "SPS_COST_MODE": "none" if code else "wait",
        "SPS_CHECKPOINT_DIR": str(folder / "ckpt"),
    }
    r = redis.Redis.from_url(redis_url)
    proc = ServiceProcess("dataplane", env).start()
    try:
        deadline = time.monotonic() + 180
        while not KnowledgeBase(r, prefix).runs():
            assert proc.alive(), proc.log.read_text()[-3000:]
            assert time.monotonic() < deadline, "dataplane did not start"
            time.sleep(0.3)
        rig = CapacityRig(bootstrap, r, Keys(prefix), proc, et_ms)
        rig.measure(1, 0.5)  # warm the Python workers
        yield rig
    finally:
        proc.stop(timeout=60)
