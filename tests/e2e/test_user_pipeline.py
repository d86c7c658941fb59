"""A user's own pipeline, as the README's "Your pipeline" runs it: a package written
outside the repository, a topology naming its functions, raw JSON records (no envelope)
on the user's own input topic, an output topic; a real broker, redis-server and Spark,
a rescale in the middle of the stream. `square` declares its cost (5 ms an event, the
demo's `wait` mode: PA-SPS scales it out for the spike), `offset`'s is measured. Run
twice: the two operators apart with ids by offset, and chained into one (`chain: true`,
one pool) with ids from a field of the records (`id: field:n`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from elastic_sps.services.ensemble import demo
from tests.support.user_project import expected_value, write_package, write_readings

pytestmark = pytest.mark.e2e

TOPOLOGY = """
name: squares
source: {topics: [user.readings], format: json, key: "field:sensor", sample_events: readings.jsonl}
operators:
  - {name: square, code: "userpipe.ops:square", max_replicas: 4, et_ms: 5}
  - {name: offset, code: "userpipe.ops:Offset", max_replicas: 4, output: user.results}
edges:
  - {from: source, to: square}
  - {from: square, to: offset}
"""


@pytest.fixture(scope="module", params=[False, True], ids=["apart", "chained"])
def chain(request) -> bool:
    return bool(request.param)


@pytest.fixture(scope="module")
def user_project(tmp_path_factory, chain) -> Path:
    root = tmp_path_factory.mktemp("user-project")
    write_package(root)
    doc = TOPOLOGY + ("chain: true\n" if chain else "")
    if chain:  # each reading carries its id: the file is read once, never cycled
        doc = doc.replace("format: json,", 'format: json, id: "field:n",')
    (root / "squares.yaml").write_text(doc)
    write_readings(root / "readings.jsonl", 12_000 if chain else 200, bad_every=50)
    return root


def _rescale_mid_stream(ens, operator: str) -> None:
    """An on-demand rescale of `operator` to 3 replicas, 8 s into the replay (besides
    PA-SPS's own)."""
    import uuid

    from confluent_kafka import Producer

    from elastic_sps.contracts.base import encode
    from elastic_sps.contracts.plan import RescaleRequest
    from elastic_sps.io.connections import kafka_config
    from elastic_sps.settings import ServiceSettings

    time.sleep(8)
    req = RescaleRequest(request_id=uuid.uuid4().hex, operator=operator, replicas=3)
    producer = Producer(kafka_config(ens.bootstrap))
    producer.produce(ServiceSettings().topics.requests, key=req.request_id, value=encode(req))
    producer.flush(10)


@pytest.fixture(scope="module")
def user_run(user_project, tmp_path_factory, chain):
    sys.path.insert(0, str(user_project))  # measuring the costs imports it here too
    path = os.environ.get("PYTHONPATH", "")
    try:
        return demo.run(
            topology=str(user_project / "squares.yaml"),
            trace_name="short-spikes",
            duration=30,
            peak_rate=400,  # square (5 ms an event) needs 2 replicas at the peak
            run_dir=tmp_path_factory.mktemp("user-run"),
            live=False,
            drain_s=90,
            compare_static=False,
            warmup_s=2,
            during=lambda ens: _rescale_mid_stream(ens, "square..offset" if chain else "square"),
            extra_env={"PYTHONPATH": os.pathsep.join(p for p in (str(user_project), path) if p)},
        )["report"]
    finally:
        sys.path.remove(str(user_project))


def test_the_output_topic_holds_each_events_output_once(user_run, user_project, chain):
    """The warm-up and the measured replay send one sequence of the file: the k-th
    record sent is the file's k-th (cycled by offset ids, never by field ids)."""
    readings = [json.loads(x) for x in (user_project / "readings.jsonl").read_text().splitlines()]
    sent = user_run["sent"]
    assert sent > 500 and user_run["lost"] == 0 and user_run["shed"] == 0
    assert user_run["ids_repeat"] is False
    out_file = Path(user_run["outputs"]["user.results"])
    rows = [json.loads(x) for x in out_file.read_text().splitlines()]
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "an event's output appeared twice"
    expected = {}
    for k in range(sent):
        value = expected_value(readings[k % len(readings)])
        if value is not None:
            expected[str(k) if chain else f"user.readings/0/{k}"] = value
    got = {r["id"]: r["value"]["v"] for r in rows}
    assert got == expected
    # the report agrees with the file: every output once, nothing processed twice
    assert user_run["completed"] == len(rows) and user_run["duplicates"] == 0


def test_a_raising_operator_dead_letters_its_events_and_the_rest_flow(user_run, chain):
    """Every 50th reading raises in `square`: dead-lettered there with the exception,
    by id; everything else reaches the output."""
    stages = {s["operator"]: s for s in user_run["stages"]}
    if chain:
        return _chained_dead_letters(user_run, stages["square..offset"])
    square, offset = stages["square"], stages["offset"]
    assert square["sent"] == user_run["sent"] and square["lost"] == 0
    assert square["dead"] > 0 and square["processed"] + square["dead"] == square["sent"]
    assert offset["sent"] == offset["processed"] == square["processed"]
    assert offset["dead"] == offset["lost"] == 0
    dead = [
        json.loads(x)
        for x in Path(user_run["deadletter"]).read_text().splitlines()
        if "square" in x
    ]
    assert len(dead) == square["dead"]
    assert all(d["service"] == "dataplane:square" for d in dead)
    assert all(d["error_type"] == "ValueError" for d in dead)
    assert all(d["reason"].startswith("ValueError: bad reading ") for d in dead)
    assert all("ops.py" in d["traceback"] and d["event_id"] for d in dead)


def _chained_dead_letters(user_run, chained: dict) -> None:
    """Chained, `square`'s failure fails the event in the chain's replica: dead-lettered
    once, the member named in the reason."""
    assert chained["sent"] == user_run["sent"] and chained["lost"] == 0
    assert chained["dead"] > 0 and chained["processed"] + chained["dead"] == chained["sent"]
    dead = [json.loads(x) for x in Path(user_run["deadletter"]).read_text().splitlines()]
    dead = [d for d in dead if d["service"].startswith("dataplane:")]
    assert len(dead) == chained["dead"]
    assert all(d["service"] == "dataplane:square..offset" for d in dead)
    assert all(d["reason"].startswith("ValueError: bad reading ") for d in dead)
    assert all(d["reason"].endswith("(in 'square', chained in 'square..offset')") for d in dead)
    assert all("ops.py" in d["traceback"] and d["event_id"] for d in dead)


def test_the_rescale_took_effect_mid_stream(user_run):
    assert user_run["scale_out_actions"] >= 1
    assert user_run["rescale_timeline"]["changes"] >= 1


def test_a_module_that_does_not_import_stops_the_dataplane_with_one_message(
    tmp_path, redis_url, kafka_bootstrap
):
    (tmp_path / "broken.yaml").write_text(
        "operators:\n  - {name: parse, et_ms: 1, code: 'no_such_pkg.ops:parse'}\n"
        "edges:\n  - {from: source, to: parse}\n"
    )
    env = {
        **os.environ,
        "SPS_TOPOLOGY": str(tmp_path / "broken.yaml"),
        "SPS_REDIS_URL": redis_url,
        "SPS_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
    }
    done = subprocess.run(
        [sys.executable, "-m", "elastic_sps.services.dataplane"],
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert (
        "operator 'parse': cannot import module 'no_such_pkg.ops' (ModuleNotFoundError"
        in done.stderr.decode()
    )
