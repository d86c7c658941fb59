"""What a pipeline developer imports: the ``ctx`` an operator gets, its return type, and
the in-process runner and check for tests (``from elastic_sps.api import Context, run_local``).
Everything else in ``shared`` may change between releases; these names will not."""

from __future__ import annotations

from elastic_sps.pipeline.check import CheckReport, Finding, check
from elastic_sps.pipeline.local_run import DeadLetter, LocalRun, run_local
from elastic_sps.pipeline.operators import Context, Output

__all__ = [
    "CheckReport",
    "Context",
    "DeadLetter",
    "Finding",
    "LocalRun",
    "Output",
    "check",
    "run_local",
]
