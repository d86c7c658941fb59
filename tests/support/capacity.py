"""One saturated operator's capacity per replica count: the benchmarks' rig, which the
capacity test uses too (benchmarks do not import tests)."""

from benchmarks.harness.capacity import CPU_CODE, OPERATOR, CapacityRig, capacity_rig

__all__ = ["CPU_CODE", "OPERATOR", "CapacityRig", "capacity_rig"]
