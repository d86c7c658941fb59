"""The services as separate processes: the benchmarks' harness, which tests use too
(benchmarks do not import tests)."""

from benchmarks.harness.processes import ServiceProcess

__all__ = ["ServiceProcess"]
