"""The simulator's cohort bookkeeping at scale: merging keeps what the metrics use."""

import pytest

from elastic_sps.model.synthetic import generated_dag
from elastic_sps.model.topology import SOURCE
from elastic_sps.simulation.fluid_queue import Cohort, coalesce

pytestmark = pytest.mark.unit


def test_coalesce_merges_cohorts_born_in_the_same_interval_keeping_the_latency_sum():
    """td = 1 s: 30 events born at 0.5 s ready at 1.0 s and 10 born at 0.9 s ready at 2.2 s
    become 40 born at (15 + 9) / 40 = 0.6 s, ready at (30 + 22) / 40 = 1.3 s: the latency
    sum stays 30 × 0.5 + 10 × 1.3 = 28 = 40 × 0.7. A cohort born at 1.2 s stays apart."""
    out = coalesce([Cohort(30, 0.5, 1.0), Cohort(10, 0.9, 2.2), Cohort(5, 1.2, 2.0)], 1.0)
    assert len(out) == 2
    merged = next(c for c in out if c.amount == 40)
    assert merged.born == pytest.approx(0.6)
    assert merged.ready == pytest.approx(1.3)
    assert merged.amount * (merged.ready - merged.born) == pytest.approx(28.0)


def test_generated_dag_reaches_every_operator_and_conserves_the_input():
    """100 operators in layers of 10, pools of 50: 5,000 replicas; the source splits over
    the 10 entry operators and every operator's output over its successors, so the sinks
    together receive each input event exactly once."""
    topo = generated_dag(100, 50, seed=1)
    assert len(topo.operators) == 100 and topo.pool_total == 5000
    assert len(topo.entry_operators) == 10
    theta = topo.static_theta
    assert all(theta[n] > 0 for n in topo.names)
    assert sum(theta[s] for s in topo.sinks) == pytest.approx(1.0)
    assert sum(e.fraction for e in topo.successors[SOURCE]) == pytest.approx(1.0)
