"""The swapped-in analyze example (examples/threshold_analyze): its rule on hand-checked
numbers, and its records valid under the project's own sps.analysis contract."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from elastic_sps.contracts.analysis import AnalysisRecord
from elastic_sps.contracts.base import decode

pytestmark = pytest.mark.unit
PATH = Path(__file__).parents[2] / "examples" / "threshold_analyze" / "threshold_analyze.py"
spec = importlib.util.spec_from_file_location("threshold_analyze", PATH)
example = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
spec.loader.exec_module(example)  # type: ignore[union-attr]


def test_on_target_keeps_the_count_above_it_scales_out():
    # 2 replicas, 1 s interval, 1.4 busy s: utilisation 0.7 = target -> 2
    assert (
        example.desired_replicas(
            {"active_replicas": 2, "busy_s": 1.4, "processed": 100}, 1.0, 0.7, 1
        )
        == 2
    )
    # 1.8 busy s: utilisation 0.9 -> 2 × 0.9 / 0.7 = 2.57 -> 3
    assert (
        example.desired_replicas(
            {"active_replicas": 2, "busy_s": 1.8, "processed": 100}, 1.0, 0.7, 1
        )
        == 3
    )


def test_a_queue_counts_as_work_and_the_floor_holds():
    # 1.0 busy s for 100 events = 10 ms each; 50 queued = 0.5 s more: (1.0 + 0.5) / 2 = 0.75
    # -> 2 × 0.75 / 0.7 = 2.14 -> 3
    op = {"active_replicas": 2, "busy_s": 1.0, "processed": 100, "queued": 50}
    assert example.desired_replicas(op, 1.0, 0.7, 1) == 3
    idle = {"active_replicas": 4, "busy_s": 0.0, "processed": 0}
    assert example.desired_replicas(idle, 1.0, 0.7, 2) == 2


def test_its_records_are_valid_sps_analysis_records():
    stats = {
        "schema_name": "sps.stats",
        "version": 1,
        "interval": 7,
        "td": 1.0,
        "input_events": 120.0,
        "closed_at": 1.0,
        "operators": {
            "parse": {"active_replicas": 1, "busy_s": 0.9, "processed": 120, "received": 120}
        },
    }
    import json

    rec = decode(json.dumps(example.analysis(stats, 0.7, 1)), AnalysisRecord)
    assert rec.policy == "threshold" and rec.interval == 7
    assert rec.operators["parse"].replicas == 2  # 0.9 / 0.7 = 1.29 -> 2
