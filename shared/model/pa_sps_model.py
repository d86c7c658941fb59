"""The PA-SPS predictive replica model (PA-SPS, JPDC 2024, §3.2, Eqs. 2-7).

Every function here is pure: statistics of interval ``t`` in, estimates for ``t+1`` out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from elastic_sps.model.interval_stats import IntervalStats
from elastic_sps.model.topology import SOURCE, Topology

# Eq. 2 rarely gives a whole number; we round *up* (a fractional replica's worth of work
# still needs a replica), after forgiving float noise so that exactly 2.0000000001 -> 2.
_ROUND_SLACK = 1e-9


def replicas_needed(load_events: float, et_s: float, td: float) -> float:
    """Eq. 2: r_i(t+1) = λ̂_i(t+1) × et_i / td (unrounded)."""
    return load_events * et_s / td


def round_replicas(raw: float, lo: int, hi: int) -> int:
    """Whole replicas within [lo, hi]: ceil of Eq. 2, clamped to the pool."""
    r = math.ceil(raw - _ROUND_SLACK) if math.isfinite(raw) else hi
    return max(lo, min(hi, r))


def edge_thetas(topo: Topology, stats: IntervalStats) -> dict[tuple[str, str], float]:
    """Eq. 6: θ_i^p(t) = λ_i^p(t) / μ_p(t); for the input stream, μ is λ_G(t).

    λ_i^p is counted where p sends it (``emitted_to``) when the statistics have it: in a
    micro-batch engine i processes p's output a batch or more later, so i's count of it
    in ``t`` and p's μ_p(t) come from different batches and their ratio jumped from 0 to
    17 between intervals live; in Storm, the paper's engine, the two coincide. Without
    ``emitted_to`` (the simulator, older records) i's received count is used. For the
    input stream the sender is the ingress: with sender-side counts, an entry operator's
    θ is its declared fraction of what the ingress admitted, (λ_G − shed) / λ_G, both
    counted by arrival time in ``t``. Where the
    predecessor processed nothing in ``t`` the ratio is undefined; we fall back to the
    fraction declared on the edge so that a quiet interval does not zero the DAG.
    """
    out: dict[tuple[str, str], float] = {}
    at_sender = any(o.emitted_to for o in stats.operators.values())
    for e in topo.edges:
        if e.src == SOURCE and at_sender and stats.input_events > 0:
            admitted = max(0.0, stats.input_events - stats.shed_events)
            out[(e.src, e.dst)] = e.fraction * admitted / stats.input_events
            continue
        base = stats.input_events if e.src == SOURCE else stats.operators[e.src].processed
        sent = stats.operators[e.dst].received_from.get(e.src)
        if e.src != SOURCE and stats.operators[e.src].emitted_to:  # counted at the sender
            sent = stats.operators[e.src].emitted_to.get(e.dst, 0.0)
        out[(e.src, e.dst)] = sent / base if (sent is not None and base > 0) else e.fraction
    return out


def operator_thetas(
    topo: Topology, edge_theta: Mapping[tuple[str, str], float]
) -> dict[str, float]:
    """Eq. 5: θ_i(t) = Σ_p θ_i^p(t) × θ_p(t), with θ_source = 1, computed source-first."""
    theta: dict[str, float] = {SOURCE: 1.0}
    for name in topo.order:
        theta[name] = sum(
            edge_theta[(e.src, e.dst)] * theta[e.src] for e in topo.predecessors[name]
        )
    return theta


def predicted_received(predicted_input: float, theta: Mapping[str, float]) -> dict[str, float]:
    """Eq. 4: λ̂_i^r(t+1) = λ̂_G(t+1) × θ_i(t)."""
    return {n: predicted_input * th for n, th in theta.items() if n != SOURCE}


def predicted_queue(
    topo: Topology,
    stats: IntervalStats,
    theta: Mapping[str, float],
    propagate: bool = True,
    edge_theta: Mapping[tuple[str, str], float] | None = None,
) -> dict[str, float]:
    """Eq. 7: λ̂_i^q(t+1) = |q_i(t)| + Σ_p λ̂_p^q(t+1) × θ_p(t).

    By default as printed: a predecessor's predicted queue is weighted by θ_p(t), its
    share of the input. With ``edge_theta`` (Eq. 6's θ_i^p(t)) it is weighted by the share
    of p's output that goes to i, the reading of §3.2's text ("the percentage of processed
    events of O_i^p sent to O_i"); on a chain the two agree, on Fig. 6 they do not.
    ``propagate=False`` is PRESPS Eq. 5: own queue only.
    """
    q: dict[str, float] = {}
    for name in topo.order:
        own = stats.operators[name].queued
        if propagate:
            for e in topo.predecessors[name]:
                if e.src == SOURCE:
                    continue
                weight = edge_theta[(e.src, name)] if edge_theta is not None else theta[e.src]
                own += q[e.src] * weight
        q[name] = own
    return q
