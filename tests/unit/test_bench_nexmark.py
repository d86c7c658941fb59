"""The Nexmark benchmark's harness: what it waits for, how it judges rows and times them."""

from __future__ import annotations

import pytest

from benchmarks.bench_nexmark import FLUSH_KEYS, PARTITIONS, Phase
from benchmarks.harness.collector import unwrap
from elastic_sps.model.keyed import DEFAULT_KEY_GROUPS, partition_of_key

pytestmark = pytest.mark.unit

T0 = 1_700_000_000_000


def test_a_phase_expects_every_window_its_events_fall_in():
    phase = Phase("q7", 2_500, 100.0, T0, seed=4)  # 25 s of event time: 10 s windows
    assert T0 + 20_000 < phase.last_ms < T0 + 25_000
    # [20 s, 30 s) too: its events are part of the phase; the flush closes it
    assert sorted(phase.windows) == [T0, T0 + 10_000, T0 + 20_000]
    short = Phase("q7", 500, 100.0, T0, seed=4)  # 5 s: no window closed by its own events
    assert sorted(short.windows) == [T0]


def test_the_flush_reaches_every_partition_of_a_keyed_stage_and_follows_the_events():
    phase = Phase("q7", 500, 100.0, T0, seed=4)
    flush = [e["bid"] for e in phase.flush_events()]
    assert min(b["dateTime"] for b in flush) > phase.last_ms
    # q7's and q5's first stage is keyed by auction, 4 partitions at most
    reached = {partition_of_key(str(b["auction"]), DEFAULT_KEY_GROUPS, 4) for b in flush}
    assert reached == {0, 1, 2, 3}
    assert len(flush) == 40 * PARTITIONS * FLUSH_KEYS
    assert phase.next_base() > max(b["dateTime"] for b in flush)


def test_a_rows_latency_runs_from_the_event_that_made_its_window_closable():
    phase = Phase("q7", 2_500, 100.0, T0, seed=4)
    phase.sent = [(T0 + 9_990, 100.0), (T0 + 10_000, 101.0), (T0 + 10_010, 102.0)]
    assert phase.closing_time(T0 + 10_000) == 101.0
    assert phase.closing_time(T0 + 9_995) == 101.0
    rows = [(101.25, r) for r in phase.expected if r["window_start"] == T0]
    rows += [(102.25, r) for r in phase.expected if r["window_start"] == T0 + 10_000]
    verdict, latency = phase.judged(rows)
    assert verdict["exact"] and latency == [250.0] * len(rows)
    assert "wrong_rows" not in verdict
    wrong = [(t, {**r, "price": r["price"] + 1}) for t, r in rows]
    verdict = phase.judged(wrong)[0]
    assert not verdict["exact"] and verdict["first_wrong"] == [T0, T0 + 10_000]
    assert verdict["wrong_rows"] == [r for _, r in wrong if r["window_start"] == T0]
    assert verdict["wanted_rows"] == [r for _, r in rows if r["window_start"] == T0]


def test_result_rows_unwrap_elastic_sps_sink_records_only():
    row = {"auction": 1, "num": 2, "window_start": 0, "window_end": 10_000}
    assert unwrap({"id": "k@0", "value": row}) == ("k@0", row)
    assert unwrap(row) == (None, row)


def test_a_changes_gap_and_spike_are_read_from_the_rows_after_it():
    from benchmarks.bench_nexmark_resize import around

    phase = Phase("q5", 500, 100.0, T0, seed=4)
    # windows end every 2 s; each made closable by an event produced at 100 + k * 2
    phase.sent = [(T0 + 2_000 * k, 100.0 + 2 * k) for k in range(20)]

    def row(k: int, seen: float) -> tuple[float, dict]:
        return seen, {"auction": 1, "num": 1, "window_start": T0 + 2_000 * k - 10_000,
                      "window_end": T0 + 2_000 * k}  # fmt: skip

    # steady: read 0.5 s after closable; after the change at 110.2, a 5 s gap, then 3 s late
    rows = [row(k, 100.5 + 2 * k) for k in range(1, 6)] + [row(k, 103.0 + 2 * k) for k in (6, 7)]
    out = around([110.2], phase, rows)
    assert out["steady_latency_ms"] == 500.0
    assert out["change1_gap_s"] == 4.5  # window 5 read at 110.5, window 6 at 115.0
    assert out["change1_max_latency_ms"] == 3000.0
