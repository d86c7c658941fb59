"""The keyed-state benchmark's operator, under the name tests give it in topologies."""

from benchmarks.harness.keyed_ops import running_total

__all__ = ["running_total"]
