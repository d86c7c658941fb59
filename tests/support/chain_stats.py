"""One interval's statistics of the built-in ``twitter`` chain at a steady rate."""

from __future__ import annotations

from elastic_sps.model.interval_stats import IntervalStats, OperatorStats

TWITTER_CHAIN = ("parse", "classify_content", "classify_author", "store")


def chain_stats(k: int, rate: float) -> IntervalStats:
    """Interval ``k``: every operator received and processed ``rate``, nothing queued."""
    ops = {
        n: OperatorStats(
            received=rate, processed=rate, queued=0, active_replicas=1, received_from={}, et_s=0.001
        )
        for n in TWITTER_CHAIN
    }
    return IntervalStats(k, 1.0, rate, ops, latency_ms=100.0)
