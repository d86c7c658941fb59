"""pyspark's worker daemon, with the replicas' modules imported before it forks.

Spark forks every Python worker from one daemon process (``pyspark.daemon``); a forked
worker then imports what its task unpickles: this project, confluent-kafka, redis,
numpy, pandas and pyarrow. Each worker paying that import on its own is most of a
query's first micro-batch when several tasks start at once on few cores (at a start,
and at a standby's takeover). Imported here once, the workers inherit the modules.
Spark runs it as ``spark.python.daemon.module`` in local modes only: on a cluster the
executors may get the project as a shipped zip, which a daemon cannot import.
"""

from __future__ import annotations

import contextlib
import gc
import importlib

# how Spark starts a daemon that serves tasks: ``python -m <daemon> pyspark.worker``; the
# workers it forks keep its command line
MODULE = "elastic_sps.services.dataplane.daemon"  # ``spark.python.daemon.module``
DAEMONS = ("pyspark.daemon", MODULE)


def serves_tasks(argv: list[str]) -> bool:
    """Whether a process with this command line is a Spark Python daemon that serves
    tasks, or a worker it forked (others serve the driver's data source calls)."""
    return len(argv) >= 4 and argv[1] == "-m" and argv[2] in DAEMONS and argv[3] == "pyspark.worker"


PRELOADED = (
    "elastic_sps.services.dataplane.replica",
    "elastic_sps.services.dataplane.source",
    "pandas",
    "pyarrow",
)


def preload(modules: tuple[str, ...] = PRELOADED) -> list[str]:
    """Import ``modules``; the names of those that imported. One that does not import is
    left to the worker, which reports it as it always did."""
    loaded = []
    for name in modules:
        # any failure (a binary mismatch raises ValueError): the worker meets it again
        # and reports it with its task, rather than the daemon dying before any task
        with contextlib.suppress(Exception):
            importlib.import_module(name)
            loaded.append(name)
    # the imported objects never die: out of the collector's way, and their pages shared
    # with the forked workers (a collection would touch, and so copy, every one)
    gc.collect()
    gc.freeze()
    return loaded


if __name__ == "__main__":
    from pyspark import daemon

    preload()
    daemon.manager()
