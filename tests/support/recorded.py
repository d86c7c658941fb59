"""Recorded sps.metrics intervals: the benchmarks' helper, which tests use too."""

from benchmarks.harness.recorded import chain_interval

__all__ = ["chain_interval"]
