"""``decisions.jsonl`` in the run folder: every ``sps.decisions`` record of the run, one per
line, for ``elastic-sps explain`` after the run (the topic lives only as long as the
broker). Appended from where the topic ended when the run started: a run that goes on
with a folder's deployment, or shares a broker with other runs, copies only its own."""

from __future__ import annotations

import threading
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from elastic_sps.io.connections import kafka_config


class DecisionLog:
    """Copies the topic into a file from its end at the start, in a thread, until
    ``close``."""

    def __init__(self, bootstrap: str, topic: str, path: Path) -> None:
        self.path = path
        self._stop = threading.Event()
        self._c = Consumer(
            kafka_config(bootstrap, **{"group.id": "sps-decision-log", "enable.auto.commit": False})
        )
        _, end = self._c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        self._c.assign([TopicPartition(topic, 0, max(0, end))])
        self._t = threading.Thread(target=self._run, name="decision-log", daemon=True)
        self._t.start()

    def _run(self) -> None:
        with self.path.open("ab") as out:
            while not self._stop.is_set():
                m = self._c.poll(0.2)
                if m is None or m.error() or not m.value():
                    continue
                out.write(m.value().rstrip(b"\n") + b"\n")  # type: ignore[union-attr]
                out.flush()

    def close(self) -> None:
        self._stop.set()
        self._t.join(5)
        self._c.close()
