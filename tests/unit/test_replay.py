"""What a replay sends: one sequence of the events file for a whole run, cycled only
when the records do not carry their own ids."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from elastic_sps.model import topology
from elastic_sps.services.ensemble.replay import EventsTooShort, events_needed, sample_events

pytestmark = pytest.mark.unit


def _topo(tmp_path, id_spec: str) -> topology.Topology:
    (tmp_path / "e.jsonl").write_text("".join(json.dumps({"n": k}) + "\n" for k in range(3)))
    return topology.from_dict(
        {
            "source": {"format": "json", "id": id_spec, "sample_events": "e.jsonl"},
            "operators": [{"name": "a", "et_ms": 1}],
            "edges": [{"from": "source", "to": "a"}],
        },
        str(tmp_path / "t.yaml"),
    )


def test_ticks_need_the_events_they_can_send():
    assert events_needed(np.array([0.5, 0.5, 0.5]), np.array([2.0, 0.2])) == 2 + 3


def test_records_with_their_own_ids_are_sent_once_and_a_short_file_is_refused(tmp_path):
    topo = _topo(tmp_path, "field:n")
    events = sample_events(topo, needed=3)
    first, rest = list(itertools.islice(events, 1)), list(events)  # one sequence
    assert [json.loads(x)["n"] for x in first + rest] == [0, 1, 2]
    with pytest.raises(EventsTooShort, match="3 events, the run sends 4"):
        sample_events(topo, needed=4)
    cycled = sample_events(topo, needed=4, cycle=True)
    assert [json.loads(x)["n"] for x in itertools.islice(cycled, 4)] == [0, 1, 2, 0]


def test_records_identified_by_offset_cycle(tmp_path):
    events = sample_events(_topo(tmp_path, "offset"), needed=10)
    assert [json.loads(x)["n"] for x in itertools.islice(events, 5)] == [0, 1, 2, 0, 1]
