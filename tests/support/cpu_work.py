"""The capacity benchmark's CPU-bound operator, under the name tests give it."""

from benchmarks.harness.cpu_work import CPU_S, burn

__all__ = ["CPU_S", "burn"]
