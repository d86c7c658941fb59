"""The simulator's event-level mode against queueing theory worked by hand, and its
bookkeeping: every event ends completed, expired, dropped or still queued."""

import numpy as np
import pytest

from elastic_sps.model.engine import EngineModel, Limits
from elastic_sps.model.topology import Operator, linear, load
from elastic_sps.policies import make_policy
from elastic_sps.simulation.simulator import simulate

pytestmark = pytest.mark.unit


def one_operator(replicas: int, et_ms: float = 10.0):
    return linear("one", [Operator("op", et_ms, replicas, replicas)])


@pytest.mark.parametrize("replicas", [1, 2])
def test_per_replica_queues_wait_as_m_d_1(replicas):
    """et = 10 ms, 50 events/s per replica (ρ = 0.5), random routing: each replica is an
    M/D/1 queue, whose Pollaczek-Khinchine wait is ρ·et / (2(1 − ρ)) = 5 ms, so 15 ms end
    to end (a shared queue for 2 replicas would wait less: per-replica queues are what
    Storm's shuffle grouping gives). Arrivals are uniform within each 1 s interval with
    a fixed count, a little more regular than Poisson: ±10 %."""
    topo = one_operator(replicas)
    arrivals = np.full(3000, 50.0 * replicas)
    res = simulate(topo, arrivals, make_policy("static:1", topo), 1.0, mode="event")
    assert res.metrics.processed_ratio == pytest.approx(1.0, abs=1e-3)
    assert res.metrics.latency_ms == pytest.approx(15.0, rel=0.10)
    assert res.mode == "event" and res.events_per_s and res.events_per_s > 0


def test_exponential_service_waits_as_m_m_1():
    """et_cv2 = 1 makes the execution time exponential: M/M/1 at ρ = 0.5 waits
    ρ·et / (1 − ρ) = 10 ms, 20 ms end to end (twice M/D/1's wait)."""
    topo = one_operator(1)
    arrivals = np.full(3000, 50.0)
    engine = EngineModel(et_cv2=1.0)
    res = simulate(topo, arrivals, make_policy("static:1", topo), 1.0, engine=engine, mode="event")
    assert res.metrics.latency_ms == pytest.approx(20.0, rel=0.10)


def test_t_out_expires_what_waited_too_long_and_nothing_is_lost():
    """One 10 ms replica (100 events/s) fed 200 events/s for 20 s, t_out = 2 s: it can
    complete at most 100 × (20 + drain) events; every other event expires, none waits
    beyond t_out, and sent = completed + expired + dropped + queued, event by event."""
    topo = one_operator(1)
    arrivals = np.full(20, 200.0)
    limits = Limits(t_out_s=2.0)
    res = simulate(
        topo,
        arrivals,
        make_policy("static:1", topo),
        1.0,
        limits=limits,
        mode="event",
        drain_intervals=10,
    )
    m = res.metrics
    completed = m.processed_ratio * 4000
    assert completed <= 100 * 30 + 1
    assert m.expired > 1500
    assert completed + m.expired + m.dropped + m.queued_at_end == pytest.approx(4000)
    assert m.latency_ms <= 2000 + 10 + 1


def test_rescaling_and_queue_limits_lose_no_event():
    """PA-SPS on the twitter chain through a spike trace with q_size = 500: replicas come
    and go (a scale-in re-routes the queues of the replicas taken away) and every event is
    still completed, dropped or queued at the end."""
    from elastic_sps.model import traces

    topo = load("twitter")
    arrivals = traces.load("spikes").per_interval(1.0)[:600]
    limits = Limits(q_size=500)
    res = simulate(
        topo, arrivals, make_policy("pa-sps:basic", topo), 1.0, limits=limits, mode="event"
    )
    m = res.metrics
    assert m.reconfigurations > 10
    sent = float(np.floor(arrivals.sum()))
    completed = m.processed_ratio * arrivals.sum()
    assert completed + m.expired + m.dropped + m.queued_at_end == pytest.approx(sent, abs=1.0)


def test_unknown_mode_is_refused():
    topo = one_operator(1)
    with pytest.raises(ValueError, match="mode"):
        simulate(topo, np.ones(3), make_policy("static:1", topo), 1.0, mode="exact")
