"""The orders checks (``tests/support/orders_check.py``) on hand-checked events: a window
that must have closed and never came out is reported, as is a wrong value or a ledger
total that missed a window; and the two-stage pipeline in process passes them."""

from __future__ import annotations

import pytest
from sps_orders.generate import orders

from elastic_sps.api import run_local
from tests.support.orders_check import (
    PIPELINE,
    WINDOW_S,
    check_ledger,
    check_totals,
    check_windows,
    ledger_windows,
)

pytestmark = pytest.mark.unit

# 5 s windows. c1: 10.00 + 5.25 in [0, 5), 1.00 in [5, 10), 2.00 in [10, 15); c2: 2.50 in
# [0, 5), 3.00 in [5, 10). The largest time is 10.0: [0, 5) and [5, 10) (its end equals
# the watermark) are due, [10, 15) is open.
SENT = [
    {"order_id": "o0", "customer": "c1", "amount": 10.0, "ts": 0.0},
    {"order_id": "o1", "customer": "c2", "amount": 2.5, "ts": 1.0},
    {"order_id": "o2", "customer": "c1", "amount": 5.25, "ts": 4.99},
    {"order_id": "o3", "customer": "c1", "amount": 1.0, "ts": 5.0},
    {"order_id": "o4", "customer": "c2", "amount": 3.0, "ts": 9.5},
    {"order_id": "o5", "customer": "c1", "amount": 2.0, "ts": 10.0},
]


def _w(key, start, orders_, cents):
    return {"key": key, "start": start, "end": start + 5, "value": {"orders": orders_,
            "cents": cents}}  # fmt: skip


DUE = {
    "c1@0": _w("c1", 0, 2, 1525),
    "c2@0": _w("c2", 0, 1, 250),
    "c1@5": _w("c1", 5, 1, 100),
    "c2@5": _w("c2", 5, 1, 300),
}
OPEN = {"c1@10": _w("c1", 10, 1, 200)}


def test_every_due_window_out_and_exact_passes_the_open_one_may_be_out():
    assert check_windows(SENT, DUE, 5.0) == []
    assert check_windows(SENT, {**DUE, **OPEN}, 5.0) == []
    # float bounds and ids compare numerically
    floats = {k: v for k, v in DUE.items() if k != "c1@0"}
    floats["c1@0.0"] = {**DUE["c1@0"], "start": 0.0, "end": 5.0}
    assert check_windows(SENT, floats, 5.0) == []


def test_an_empty_output_reports_every_due_window():
    wrong = check_windows(SENT, {}, 5.0)
    assert len(wrong) == 4 and all("never came out" in w for w in wrong)
    assert [w.split(":")[0] for w in wrong] == ["c1@0.0", "c2@0.0", "c1@5.0", "c2@5.0"]


def test_one_missing_window_is_reported():
    short = {k: v for k, v in DUE.items() if k != "c2@5"}  # ends at 10 = the watermark
    wrong = check_windows(SENT, short, 5.0)
    assert len(wrong) == 1 and wrong[0].startswith("c2@5.0: never came out")
    # with 1 s of lateness, [5, 10) is not due (10 + 1 > 10): both may be missing
    assert check_windows(SENT, {k: DUE[k] for k in ("c1@0", "c2@0")}, 5.0, lateness_s=1) == []


def test_a_wrong_value_end_id_or_stray_window_is_reported():
    assert len(check_windows(SENT, {**DUE, "c1@0": _w("c1", 0, 2, 1500)}, 5.0)) == 1
    assert len(check_windows(SENT, {**DUE, "c1@10": _w("c1", 10, 2, 200)}, 5.0)) == 1
    assert len(check_windows(SENT, {**DUE, "c1@0": {**DUE["c1@0"], "end": 6}}, 5.0)) == 1
    # c1@5's window under the id c1@0: a wrong id, and [0, 5) of c1 never came out
    assert len(check_windows(SENT, {**DUE, "c1@0": DUE["c1@5"]}, 5.0)) == 2
    assert len(check_windows(SENT, {**DUE, "c2@10": _w("c2", 10, 1, 100)}, 5.0)) == 1


def test_a_count_window_as_the_one_stage_pipeline_emits_it():
    counts = {k: {**w, "value": w["value"]["orders"]} for k, w in DUE.items()}
    assert check_windows(SENT, counts, 5.0) == []
    assert len(check_windows(SENT, {**counts, "c1@0": {**counts["c1@0"], "value": 3}}, 5.0)) == 1


def _ledger(customer, start, n, cents, windows, total):
    return {"customer": customer, "start": start, "end": start + 5, "orders": n,
            "cents": cents, "windows": windows, "total_cents": total}  # fmt: skip


LEDGER = {
    "c1@0": _ledger("c1", 0, 2, 1525, 1, 1525),
    "c1@5": _ledger("c1", 5, 1, 100, 2, 1625),
    "c2@0": _ledger("c2", 0, 1, 250, 1, 250),
    "c2@5": _ledger("c2", 5, 1, 300, 2, 550),
}


def test_the_ledger_running_totals():
    assert check_ledger(SENT, LEDGER, 5.0) == []
    assert check_windows(SENT, ledger_windows(LEDGER), 5.0) == []
    third = {"c1@10": _ledger("c1", 10, 1, 200, 3, 1825)}
    assert check_ledger(SENT, {**LEDGER, **third}, 5.0) == []
    # a window result applied twice: the next window's count and total are off
    twice = {**LEDGER, "c1@5": _ledger("c1", 5, 1, 100, 3, 3150)}
    assert len(check_ledger(SENT, twice, 5.0)) == 1


def test_a_ledger_short_of_a_due_window_is_reported():
    short = {k: v for k, v in LEDGER.items() if k != "c2@5"}
    wrong = check_ledger(SENT, short, 5.0)
    assert wrong == ["c2: the ledger's state after 1 windows; 2 are due, total 550 cents"]
    assert len(check_ledger(SENT, {}, 5.0)) == 2  # c1 and c2: nothing out


def test_the_two_stage_pipeline_in_process_passes_the_checks(tmp_path):
    # run_local closes every window at the end of the input: all are out, due or not
    (tmp_path / "orders.yaml").write_text(PIPELINE)
    sent = orders(900, rate=60.0, seed=3)
    run = run_local(tmp_path / "orders.yaml", sent)
    assert not run.dead_letters and not run.late
    totals = {v["order"]: v for v in run.outputs["orders.totals"]}
    ledger = {f"{v['customer']}@{v['start']}": v for v in run.outputs["orders.ledger"]}
    assert check_totals(sent, totals) == []
    assert check_windows(sent, ledger_windows(ledger), WINDOW_S) == []
    assert check_ledger(sent, ledger, WINDOW_S) == []
    assert len(ledger) > 100
    # the checks see what the pipeline missed: its last due windows held back
    due_end = max(e["ts"] for e in sent) // WINDOW_S * WINDOW_S
    held = {k: v for k, v in ledger.items() if v["end"] < due_end}
    assert check_windows(sent, ledger_windows(held), WINDOW_S) != []
    assert check_ledger(sent, held, WINDOW_S) != []
