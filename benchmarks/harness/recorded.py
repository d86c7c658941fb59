"""Recorded sps.metrics intervals for a chain of operators, as the dataplane reports them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from elastic_sps.contracts.metrics import OperatorCounters


def chain_interval(
    operators: Sequence[str],
    interval: int,
    rate: float,
    et_s: float | Mapping[str, float] = 0.001,
    sink_latency_ms: Sequence[float] = (),
) -> list[OperatorCounters]:
    """One interval at ``rate`` events/s through ``operators`` in a line, all processed:
    the source's λ_G, then each operator receiving from the one before; the last one is
    the sink (emits nothing, reports the end-to-end latency samples). ``et_s``: the busy
    time per event each operator reports (one value, or one per operator)."""
    recs = [OperatorCounters(interval=interval, operator="source", processed=rate)]
    prev = "source"
    for op in operators:
        sink = op == operators[-1]
        recs.append(
            OperatorCounters(
                interval=interval,
                operator=op,
                received_from={prev: rate},
                processed=rate,
                emitted=0.0 if sink else rate,
                busy_s=rate * (et_s[op] if isinstance(et_s, Mapping) else et_s),
                active_replicas=1,
                latency_ms=list(sink_latency_ms) if sink else [],
                latency_ms_sum=sum(sink_latency_ms) if sink else 0.0,
                latency_n=len(sink_latency_ms) if sink else 0,
            )
        )
        prev = op
    return recs
