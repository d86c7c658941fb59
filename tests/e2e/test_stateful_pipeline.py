"""A two-stage stateful pipeline end to end (real Kafka, Redis, Spark): raw JSON orders
with event times through `validate` (stateless, a pool of up to 4), then a tumbling window
of each customer's orders and cents per 5 s of event time (`spend`) whose results go on to
`ledger`, keyed by customer, which keeps a running count of the customer's windows and
total of their cents in its state; beside them a keyed running total per customer and
order (`total`) on the source (``tests/support/orders_check.PIPELINE``). Meanwhile:
on-demand rescales 1 -> 4 -> 2 of every operator, PA-SPS scaling it for a spike (a keyed
change takes effect when a batch is planned with it: the test asserts at least two moves,
not which), one Spark Python worker killed (``kill -9``), then the Spark driver
(``kill -9``).

Outputs are delivered at least once with deterministic ids, so a repeat carries its
first delivery's value: the test drops repeats by id after checking they agree. Then,
against what ``tests/support/orders_check.py`` computes from the events file itself: no
event is late (none is generated late), each order's running total is exact, every
window whose end is at most the largest event time sent (the watermark once the input
is consumed) came out once with its exact orders and cents, and the ledger's running
totals, and so its final state per customer, are exact."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from sps_orders.generate import orders

from elastic_sps.services.dataplane.daemon import serves_tasks
from elastic_sps.services.ensemble import demo
from elastic_sps.services.execute.client import send_rescale
from tests.support.orders_check import (
    PIPELINE,
    WINDOW_S,
    check_ledger,
    check_totals,
    check_windows,
    expected_windows,
    is_due,
    ledger_windows,
    outputs_once,
)

pytestmark = pytest.mark.e2e

OPERATORS = ("validate", "total", "spend", "ledger")


def _processes() -> dict[int, tuple[int, list[str], int]]:
    """Every process's parent, arguments and CPU time (clock ticks), from /proc."""
    out: dict[int, tuple[int, list[str], int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text().rsplit(")", 1)[1].split()
            argv = (d / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        out[int(d.name)] = (int(stat[1]), argv, int(stat[11]) + int(stat[12]))
    return out


def _python_workers(dataplane: int) -> list[int]:
    """The dataplane's Spark Python workers, busiest first: under the driver's JVM,
    ``python -m <daemon> pyspark.worker`` (``serves_tasks``: the daemon that serves tasks; others
    serve the driver's data source calls) forks a worker per task slot, reused, with its
    own command line: those children, not the daemon (an idle daemon killed fails no
    task); or ``python -m pyspark.worker`` where Spark runs no daemon."""
    procs = _processes()

    def under(pid: int) -> bool:
        while pid not in (0, 1, dataplane) and pid in procs:
            pid = procs[pid][0]
        return pid == dataplane

    daemons = {p for p, (_, argv, _) in procs.items() if serves_tasks(argv) and under(p)}
    workers = [p for p in daemons if procs[p][0] in daemons]
    workers += [
        p for p, (_, argv, _) in procs.items() if argv[1:3] == ["-m", "pyspark.worker"] and under(p)
    ]
    return sorted(workers, key=lambda p: -procs[p][2])


def _kill_a_worker(ens, log: dict, within_s: float = 10.0) -> None:
    dataplane = next(c for c in ens.children if c.name == "dataplane").proc.pid
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        workers = _python_workers(dataplane)
        if workers:
            try:
                os.kill(workers[0], signal.SIGKILL)
            except ProcessLookupError:  # it ended meanwhile: take another
                continue
            log["worker_killed"], log["workers_seen"] = workers[0], len(workers)
            return
        time.sleep(0.1)
    log["worker_missing"] = f"no Spark Python worker under the dataplane ({dataplane})"


def _at(log: dict, at_s: float) -> None:
    time.sleep(max(0.0, at_s - (time.monotonic() - log["t0"])))


def _faults(ens, log: dict) -> None:
    """1 -> 4 replicas at 4 s, -> 2 at 9 s (every operator), a Spark Python worker
    killed at 12 s, the driver (the dataplane process) at 17 s."""
    log["t0"] = time.monotonic()
    for at, n in ((4, 4), (9, 2)):
        _at(log, at)
        for op in OPERATORS:
            send_rescale(ens.bootstrap, op, n)
    _at(log, 12)
    _kill_a_worker(ens, log)
    _at(log, 17)
    child = next(c for c in ens.children if c.name == "dataplane")
    os.kill(child.proc.pid, signal.SIGKILL)
    log["killed"] = True


@pytest.fixture(scope="module")
def stateful_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("orders")
    (root / "orders.yaml").write_text(PIPELINE)
    # 60 orders a second of event time: a 5 s window closes every 300 orders
    events = orders(25_000, rate=60.0, seed=11)
    (root / "orders.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    log: dict = {}
    out = demo.run(
        topology=str(root / "orders.yaml"),
        trace_name="short-spikes",
        duration=30,
        peak_rate=900,  # `total` (2 ms an event) needs 3 replicas at the peak: PA-SPS moves state
        run_dir=tmp_path_factory.mktemp("orders-run"),
        live=False,
        drain_s=120,
        compare_static=False,
        plots=False,  # tests/unit/test_report.py draws them
        warmup_s=2,
        events_file=str(root / "orders.jsonl"),
        during=lambda ens: _faults(ens, log),
    )
    rep = out["report"]
    return rep, events[: rep["sent"]], log


def test_nothing_is_lost_or_late_and_the_faults_happened(stateful_run):
    rep, _, log = stateful_run
    assert log.get("worker_killed"), log.get("worker_missing")
    assert log.get("killed") and rep["restarts"].get("dataplane", 0) >= 1
    assert rep["lost"] == 0 and rep["shed"] == 0 and rep["dead_lettered"] == 0
    # no order is generated late: each source partition's times only grow
    assert all(s["lost"] == 0 and s["late"] == 0 for s in rep["stages"]), rep["stages"]
    # a keyed change takes effect when a batch is planned with it (a count the next
    # periodic plan takes back within a batch never does): PA-SPS's own under the spike
    moves = rep["state_moves"]
    assert rep["rescale_timeline"]["changes"] >= 2 and moves["moves"] >= 2
    assert moves["key_groups_moved"] > 0 and moves["pause_s"]["max"] is not None


def test_every_customers_running_total_is_exact(stateful_run):
    rep, sent, _ = stateful_run
    totals, differ = outputs_once(rep["outputs"]["orders.totals"])
    assert differ == [], "an order's output delivered twice with different values"
    assert check_totals(sent, totals) == []


def test_every_due_window_came_out_once_with_its_exact_value(stateful_run):
    rep, sent, _ = stateful_run
    ledger, differ = outputs_once(rep["outputs"]["orders.ledger"])
    # a window's result reaches the ledger once: a second effect would change its totals
    assert differ == [], f"a window's ledger output repeated with another value: {differ[:5]}"
    watermark = max(e["ts"] for e in sent)
    due = [w for w in expected_windows(sent, WINDOW_S) if is_due(w[1], WINDOW_S, 0, watermark)]
    assert len(due) > 100  # the run spans many windows
    wrong = check_windows(sent, ledger_windows(ledger), WINDOW_S)
    assert wrong == [], f"{len(wrong)} windows wrong or missing of {len(due)} due: {wrong[:5]}"


def test_the_second_stage_running_totals_and_final_state_are_exact(stateful_run):
    rep, sent, _ = stateful_run
    ledger, _ = outputs_once(rep["outputs"]["orders.ledger"])
    wrong = check_ledger(sent, ledger, WINDOW_S)
    assert wrong == [], f"{len(wrong)} ledger outputs wrong: {wrong[:5]}"
