"""The simulator's queues, t_out, q_size and metrics against hand-worked numbers.

Every operator below runs 1 replica at et = 10 ms: 100 events/s."""

import numpy as np
import pytest

from elastic_sps.model import topology
from elastic_sps.model.engine import EngineModel, Limits
from elastic_sps.model.topology import Operator
from elastic_sps.policies import make_policy
from elastic_sps.simulation.fluid_queue import gg_c_wait
from elastic_sps.simulation.simulator import simulate

pytestmark = pytest.mark.unit


def chain(n: int) -> topology.Topology:
    return topology.linear("chain", [Operator(f"op{i}", 10.0, 1, 8) for i in range(n)])


def run(topo, arrivals, spec="static:1", **kw):
    return simulate(topo, np.asarray(arrivals, dtype=float), make_policy(spec, topo), 1.0, **kw)


def test_an_overloaded_chain_completes_half_and_degrades_by_half():
    """The issue's example: 200 events/s for 10 s into 4 operators of 100 events/s.
    Only 1,000 of 2,000 events reach the sink: processed 0.5, degradation |200−100|/200
    = 0.5 in every interval (the old all-operator sums said 0.80 and 0.20)."""
    res = run(chain(4), [200.0] * 10)
    m = res.metrics
    assert sum(res.series.completed) == pytest.approx(1000.0)
    assert m.processed_ratio == pytest.approx(0.5)
    assert m.throughput_degradation == pytest.approx(0.5)
    assert m.queued_at_end == pytest.approx(1000.0)


def test_a_quiet_tail_drains_everything_with_the_backlog_in_the_latency():
    """Same spike, then 10 quiet seconds: all 2,000 complete. FIFO at 100/s: the event
    entering at s (0 ≤ s < 10) starts service at 2s (the server is busy from 0 to 20 s),
    so it waits s; the mean wait over the spike is 5 s."""
    res = run(chain(1), [200.0] * 10 + [0.0] * 10)
    m = res.metrics
    assert m.processed_ratio == pytest.approx(1.0)
    assert 4_500 < m.latency_ms < 5_600  # 5 s of waiting, plus et and interval granularity


def test_q_size_drops_the_newest_events():
    """100/s served, 200/s arriving, q_size 150: the queue ends the intervals at 100,
    then 200 − 50 dropped, then 250 − 100 dropped twice more... 50 + 3 × 100 = 350
    dropped in 5 s; 500 processed and 150 still queued: 500 + 350 + 150 = 1,000."""
    res = run(chain(1), [200.0] * 5, limits=Limits(q_size=150))
    assert res.series.dropped == pytest.approx([0, 50, 100, 100, 100])
    assert res.metrics.dropped == pytest.approx(350)
    assert sum(res.series.completed) == pytest.approx(500)
    assert res.metrics.queued_at_end == pytest.approx(150)


def test_t_out_expires_what_waited_too_long_and_conserves_events():
    """200/s for 10 s into 100/s, then quiet, t_out 3 s: nothing completes after waiting
    more than 3 s; every event is completed, expired or still queued."""
    res = run(chain(1), [200.0] * 10 + [0.0] * 10, limits=Limits(t_out_s=3.0))
    m = res.metrics
    assert m.expired > 0
    assert sum(res.series.completed) + m.expired + m.queued_at_end == pytest.approx(2000.0)
    pairs = zip(res.series.latency_ms, res.series.completed, strict=True)
    late = [lat for lat, n in pairs if n > 0]
    assert max(late) <= 3_000 + 10 + 1_000  # t_out, et, and one interval of granularity


def test_the_paper_static_r1_row_loses_events_with_t_out():
    """Without t_out an overloaded static r = 1 eventually processes everything in a long
    enough tail; with the paper's t_out = 30 s what waited longer expires."""
    arrivals = [200.0] * 60 + [0.0] * 120
    no_limit = run(chain(1), arrivals).metrics
    limited = run(chain(1), arrivals, limits=Limits(t_out_s=30.0)).metrics
    assert no_limit.processed_ratio == pytest.approx(1.0)
    assert limited.processed_ratio < 0.8
    assert limited.expired > 0


def test_waiting_below_saturation_follows_pollaczek_khinchine():
    """One server, deterministic 10 ms service, Poisson arrivals: M/D/1 waits
    ρ / (2 μ (1 − ρ)): 5 ms at ρ = 0.5 and 45 ms at ρ = 0.9, so the end-to-end latency is
    15 ms and 55 ms: a plan that runs its replicas at 90 % pays for it."""
    assert gg_c_wait(0.5, 1, 0.010) == pytest.approx(0.005)
    assert gg_c_wait(0.9, 1, 0.010) == pytest.approx(0.045)
    assert run(chain(1), [50.0] * 10).metrics.latency_ms == pytest.approx(15.0)
    assert run(chain(1), [90.0] * 10).metrics.latency_ms == pytest.approx(55.0)


def test_m_m_2_wait_matches_erlang_c():
    """Two servers at ρ = 0.5, exponential service (c_s² = 1), mean 10 ms: Erlang C gives
    P(wait) = 1/3 and W_q = P / (c μ − λ) = (1/3) / (200 − 100) = 3.33 ms; Sakasegawa's
    ρ^(√6 − 1) / (2 · 0.5) · 10 ms = 3.67 ms is its usual ~10 % approximation."""
    assert gg_c_wait(0.5, 2, 0.010, cs2=1.0) == pytest.approx(1 / 300, rel=0.12)


def test_each_micro_batch_hop_adds_its_time_and_may_move_an_event_to_a_later_interval():
    """hop 0.6 s per operator at 10 events/s: each hop costs 0.6 s + 10 ms + the M/D/1
    wait at ρ = 0.1, 0.1 / (2 · 100 · 0.9) s = 0.56 ms. The first operator's output is
    ready after its interval ended, so the sink completes it in the next one."""
    res = run(chain(2), [10.0] * 5 + [0.0] * 3, engine=EngineModel(hop_s=0.6))
    assert res.metrics.latency_ms == pytest.approx(2 * (600 + 10 + 0.1 / (2 * 100 * 0.9) * 1000))
    assert res.series.completed[0] == 0.0
    assert res.series.completed[1] == pytest.approx(10.0)


def test_a_plan_delay_postpones_every_change():
    """PA-SPS Basic on 100 then 500 events/s: the plan made at the end of t = 1 is
    active at t = 2 (README), and two intervals later with plan_delay = 2."""
    topo = topology.linear("one", [Operator("a", 10.0, 1, 8)])
    arrivals = [100.0, 500.0, 500.0, 500.0, 0.0, 0.0]
    prompt = run(topo, arrivals, "pa-sps:basic").series.replicas["a"]
    late = run(topo, arrivals, "pa-sps:basic", engine=EngineModel(plan_delay=2)).series
    assert prompt[:3] == [1, 1, 8]
    assert late.replicas["a"][:5] == [1, 1, 1, 1, 8]


def test_a_fractional_plan_delay_serves_part_of_the_interval_at_the_old_count():
    """One operator of 100 events/s a replica. At t = 1, 500 arrive and 1 replica serves
    100: 400 queue, and Basic plans ceil((500 + 400) × 0.01) = 9, capped at the pool's 8.
    With the plan taking effect half an interval late, t = 2 has 1 replica for 0.5 s and
    8 for 0.5 s: 0.5 × 100 + 0.5 × 800 = 450 of the 900 waiting are served (without
    delay 800), and t = 3, all at 8, serves 800 of the 450 + 500 waiting."""
    topo = topology.linear("one", [Operator("a", 10.0, 1, 8)])
    arrivals = [100.0, 500.0, 500.0, 500.0, 0.0, 0.0]
    prompt = run(topo, arrivals, "pa-sps:basic").series
    half = run(topo, arrivals, "pa-sps:basic", engine=EngineModel(plan_delay=0.5)).series
    assert prompt.completed[2] == pytest.approx(800.0)
    assert half.completed[:4] == pytest.approx([100.0, 100.0, 450.0, 800.0])
    assert half.replicas["a"][:4] == [1, 1, 1, 8]  # the count that held longer (or as long)
