"""What outlives a task in a reused Spark Python worker (``WORKER``): its clients, the
opened user operators, their failure guards, the LAS sketch state, the slot threads."""

from __future__ import annotations

import contextlib
import gc
from concurrent.futures import ThreadPoolExecutor
from typing import Any


class WorkerState:
    """What outlives a task in a reused Spark Python worker: its clients, the opened
    user operators, their failure guards, the LAS sketch state. One per worker process
    (``WORKER``): Spark unpickles a fresh reader for every task, so nothing else lasts."""

    def __init__(self) -> None:
        self._held: dict[Any, Any] = {}
        self._frozen = False

    def get(self, key: Any, make: Any) -> Any:
        if key not in self._held:
            self._held[key] = make()
        return self._held[key]

    def freeze_heap_once(self) -> None:
        """pyspark's daemon runs ``gc.collect()`` after every task of a reused worker, and a
        full collection over this project's modules is most of a short task's CPU. Moving
        what is loaded now into the permanent generation makes those collections ~free.

        pandas first: pyarrow imports it lazily at the first batch that returns rows
        (``RecordBatch.from_arrays`` in pyspark's ``plan_data_source_read``); its modules,
        loaded after the freeze, would make every later collection walk them again."""
        if not self._frozen:
            # without pandas, pyspark's Arrow path has nothing to preload
            with contextlib.suppress(ImportError):
                import pandas  # noqa: F401
            gc.collect()
            gc.freeze()
            self._frozen = True


WORKER = WorkerState()


def threads() -> ThreadPoolExecutor:
    """The worker's slot threads (a ``wait``-bound slot releases the GIL while occupied)."""
    pool: ThreadPoolExecutor = WORKER.get("threads", lambda: ThreadPoolExecutor(max_workers=64))
    return pool
