"""A user's own pipeline, as the README's "Your pipeline" runs it: a package written
outside the repository, a topology naming its functions, raw JSON records (no envelope)
on the user's own input topic, an output topic; a real broker, redis-server and Spark,
a rescale in the middle of the stream. `square` declares its cost (5 ms an event, the
demo's `wait` mode: PA-SPS scales it out for the spike), `offset`'s is measured; the two
are chained into one pool (`chain: true`), with ids from a field of the records (`id:
field:n`). The run also carries `visits`, a keyed operator with `state_ttl_s` on the
records' event times (`time: field:t`): its live outputs, final state and expiry count
are compared with `run_local`'s on the same records. (Operators apart, each its own pool
and topic, run live in `tests/integration/test_dataplane.py` and the other ensembles; ids
by offset in `tests/compose`.)"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from elastic_sps.api import run_local
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

# The chained run's keyed operator: a visit count per user whose state expires after
# 2 s of event time without a visit for the user. Each record carries `t` = n / 100 s;
# users u0..u9 have 100 consecutive records each (n < 1000), every later one is `rest`'s.
VISITS_TTL_S = 2
# It heads a chain of its stateless successor `visited` (which passes its outputs on, but
# raises on a user's 30th visit): one keyed pool, `visits..visited`, writing `visited`'s
# output topic. Its failures are its own inputs', beside the chain's events.
VISITS = f"""  - {{name: visits, code: "userpipe.visits:visits", key: "field:user", et_ms: 1,
     max_replicas: 2, state_ttl_s: {VISITS_TTL_S}}}
  - {{name: visited, code: "userpipe.visits:visited", et_ms: 0.1, max_replicas: 2,
     output: user.visits}}
"""
VISITS_EDGES = "  - {from: source, to: visits}\n  - {from: visits, to: visited}\n"
VISITS_CODE = '''
def visits(payload, ctx):
    """A user's visits: how many, the first and the latest record (n) of the user."""
    ctx.state["count"] = ctx.state.get("count", 0) + 1
    ctx.state.setdefault("first", payload["n"])
    ctx.state["last"] = payload["n"]
    return [(None, {"user": ctx.key, **ctx.state})]


def visited(payload, ctx):
    if payload["count"] == 30:
        raise ValueError(f"visit 30 of {payload['user']}")
    return [(None, payload)]
'''
# u<j>'s 30th record is n = 100j + 29, `rest`'s (from n = 1000) n = 1029
VISIT_30 = {100 * j + 29 for j in range(10)} | {1029}


def _user(n: int) -> str:
    return f"u{n // 100}" if n < 1000 else "rest"


def _with_visits(root: Path, doc: str) -> str:
    """The topology with `visits` on the source, event times from `t`, and its code and
    fields in the user's package and readings."""
    (root / "userpipe" / "visits.py").write_text(VISITS_CODE)
    path = root / "readings.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    path.write_text(
        "".join(json.dumps({**r, "t": r["n"] / 100, "user": _user(r["n"])}) + "\n" for r in rows)
    )
    doc = doc.replace("format: json,", 'format: json, time: "field:t",')
    return doc.replace("edges:\n", VISITS + "edges:\n" + VISITS_EDGES)


@pytest.fixture(scope="module")
def user_project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("user-project")
    write_package(root)
    # each reading carries its id: the file is read once, never cycled, so event times
    # only grow and the TTL's expiry is deterministic
    doc = TOPOLOGY.replace("format: json,", 'format: json, id: "field:n",') + "chain: true\n"
    write_readings(root / "readings.jsonl", 12_000, bad_every=50)
    (root / "squares.yaml").write_text(_with_visits(root, doc))
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
def user_run(user_project, tmp_path_factory):
    path = os.environ.get("PYTHONPATH", "")
    with _importable(user_project):  # measuring the costs imports it here too
        return demo.run(
            topology=str(user_project / "squares.yaml"),
            trace_name="short-spikes",
            duration=20,  # ~3,000 events (the trace's mean is 0.38 of its peak), > 1,300
            peak_rate=400,  # square (5 ms an event) needs 2 replicas at the peak
            run_dir=tmp_path_factory.mktemp("user-run"),
            live=False,
            drain_s=90,
            compare_static=False,
            warmup_s=2,
            plots=False,  # tests/unit/test_report.py draws them
            during=lambda ens: _rescale_mid_stream(ens, "square..offset"),
            extra_env={"PYTHONPATH": os.pathsep.join(p for p in (str(user_project), path) if p)},
        )["report"]


@contextlib.contextmanager
def _importable(root: Path) -> Iterator[None]:
    """``root``'s ``userpipe`` importable here: another project's, imported
    before, forgotten."""
    for name in [m for m in sys.modules if m == "userpipe" or m.startswith("userpipe.")]:
        del sys.modules[name]
    sys.path.insert(0, str(root))
    try:
        yield
    finally:
        sys.path.remove(str(root))


def test_the_output_topic_holds_each_events_output_once(user_run, user_project):
    """The warm-up and the measured replay send one sequence of the file: the k-th
    record sent is the file's k-th, its id `k`."""
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
        value = expected_value(readings[k])
        if value is not None:
            expected[str(k)] = value
    got = {r["id"]: r["value"]["v"] for r in rows}
    assert got == expected
    # the report agrees with the files: every output once, nothing processed twice
    # (`completed` is in input events: each declares one output per sink, so the distinct
    # ids at the sinks over their number)
    sinks = {t: {r["id"] for r in _rows(p)} for t, p in user_run["outputs"].items()}
    assert user_run["completed"] == sum(map(len, sinks.values())) / len(sinks)
    assert len(sinks["user.results"]) == len(rows) and user_run["duplicates"] == 0


def _rows(path: str) -> list[dict]:
    return [json.loads(x) for x in Path(path).read_text().splitlines()]


def test_a_keyed_operators_ttl_state_is_run_locals(user_run, user_project):
    """`visits` (live, heading the chain `visits..visited`) and in `run_local` (apart)
    over the records sent: the same output for each record, the same final state, the
    same expiry count. By hand: u<j>'s last record is n = 100j + 99 at t = j + 0.99 s, so
    its state lives until j + 2.99 s; the records sent reach t > 11.99 (n >= 1200), so the
    watermark passes every u<j>'s (10 keys expire) but never `rest`'s, whose records are
    0.01 s apart (its state never lapses, and the input's end expires nothing). No u<j>
    record comes after its state expired, so however the watermark lags live, no key
    starts afresh."""
    sent = user_run["sent"]
    assert sent > 1300
    records = [json.loads(x) for x in (user_project / "readings.jsonl").read_text().splitlines()]
    with _importable(user_project):
        local = run_local(user_project / "squares.yaml", records[:sent])
    rest = {"count": sent - 1000, "first": 1000, "last": sent - 1}
    assert local.expired_state == {"visits": 10}
    assert local.state["visits"] == {"rest": rest}
    assert user_run["state"]["visits..visited"]["state_expired"] == 10
    # and gone: only `rest` holds state at the end, live as in run_local
    assert user_run["state"]["visits..visited"]["keys"] == 1
    live: dict[str, dict] = {}
    for r in _rows(user_run["outputs"]["user.visits"]):
        assert live.setdefault(r["id"], r["value"]) == r["value"], "a repeat differs"
    kept = [n for n in range(sent) if n not in VISIT_30]
    expected = {str(n): v for n, v in zip(kept, local.outputs["user.visits"], strict=True)}
    assert live == expected
    # live, `rest`'s state is what its latest record's output carries
    assert live[str(sent - 1)] == {"user": "rest", **rest}


def test_a_raising_operator_dead_letters_its_events_and_the_rest_flow(user_run):
    """Every 50th reading raises in `square`: its event fails in the chain's replica,
    dead-lettered once with the exception, by id, the member named in the reason;
    everything else reaches the output."""
    chained = {s["operator"]: s for s in user_run["stages"]}["square..offset"]
    assert chained["sent"] == user_run["sent"] and chained["lost"] == 0
    assert chained["dead"] > 0 and chained["processed"] + chained["dead"] == chained["sent"]
    dead = [json.loads(x) for x in Path(user_run["deadletter"]).read_text().splitlines()]
    dead = [d for d in dead if d["service"] == "dataplane:square..offset"]
    assert len(dead) == chained["dead"]
    assert all(d["error_type"] == "ValueError" for d in dead)
    assert all(d["reason"].startswith("ValueError: bad reading ") for d in dead)
    assert all(d["reason"].endswith("(in 'square', chained in 'square..offset')") for d in dead)
    assert all("ops.py" in d["traceback"] and d["event_id"] for d in dead)


def test_a_chained_members_failed_inputs_are_counted_beside_the_chains_events(
    user_run, user_project
):
    """`visited` raises on each user's 30th visit (11 users reach it: `VISIT_30`): each of
    those inputs is dead-lettered once, by id, naming the member; the chain's own events
    all count as processed (their effect, the visit, was applied), the members' failures
    apart, in the ledger, the counters and the report's total, as in `run_local`."""
    assert user_run["sent"] > 1300  # every user's 30th visit was sent
    chained = {s["operator"]: s for s in user_run["stages"]}["visits..visited"]
    assert chained["sent"] == user_run["sent"] and chained["lost"] == 0
    assert chained["processed"] == chained["sent"] and chained["dead"] == 0
    assert chained["members_dead"] == 11
    dead = [json.loads(x) for x in Path(user_run["deadletter"]).read_text().splitlines()]
    dead = [d for d in dead if d["service"] == "dataplane:visits..visited"]
    assert sorted(int(d["event_id"]) for d in dead) == sorted(VISIT_30)
    assert all(d["reason"].startswith("ValueError: visit 30 of ") for d in dead)
    assert all(d["reason"].endswith("(in 'visited', chained in 'visits..visited')") for d in dead)
    # the counters' total: `square..offset`'s failed events and these (nothing repeated)
    square = {s["operator"]: s for s in user_run["stages"]}["square..offset"]
    assert user_run["dead_lettered"] == square["dead"] + 11
    with _importable(user_project):
        records = _rows(str(user_project / "readings.jsonl"))[: user_run["sent"]]
        local = run_local(user_project / "squares.yaml", records)
    local_dead = {d.event_id for d in local.dead_letters if d.operator == "visited"}
    assert local_dead == {str(n) for n in VISIT_30}


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
