"""``benchmarks/bench_steps.py`` on a real broker and redis-server: a round serves every
record it built through the replica's real steps, and its outputs are delivered, so its
CPU per event is a figure over events that went through."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import bench_steps
from elastic_sps.io.kafka_io import read_topics
from elastic_sps.io.state_store import PartitionStore

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("case", ["twitter-entry", "twitter-chain"])
def test_a_round_serves_every_record_and_delivers_its_outputs(
    case: str, kafka_bootstrap: str, redis_url: str, tmp_path: Path
) -> None:
    g = bench_steps.group_for(case, kafka_bootstrap, redis_url, tmp_path)
    work = bench_steps.chunks(case, 1200, seed=3)  # three chunks: 500, 500, 200
    assert [len(chunk[0].records) for chunk in work] == [500, 500, 200]
    us, processed = bench_steps.one_round(g, work, 1200)
    assert processed == 1200
    assert us > 0
    assert g.op.output is not None
    out = read_topics(kafka_bootstrap, [g.op.output], quiet_s=1.0)[g.op.output]
    assert len({row["id"] for row in out}) == 1200  # one output per tweet, each its own id


def test_the_keyed_case_applies_every_bid_and_commits_the_partition(
    kafka_bootstrap: str, redis_url: str, tmp_path: Path
) -> None:
    g = bench_steps.group_for("q7-keyed", kafka_bootstrap, redis_url, tmp_path)
    work = bench_steps.chunks("q7-keyed", 600, seed=1)
    _, processed = bench_steps.one_round(g, work, 600)
    assert processed == 600
    assert PartitionStore(g.r, g.keys, g.operator, 0).committed == 600  # the round's commit
