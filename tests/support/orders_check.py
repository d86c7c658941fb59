"""What a run of the orders pipelines must have output: the fault benchmark's checks
(``benchmarks/harness/orders_check.py``), which the stateful tests use too."""

from benchmarks.harness.orders_check import *  # noqa: F403  (a re-export, its __all__)
