"""A terminal view of the running ensemble, one refresh per interval (rich)."""

from __future__ import annotations

import json
import threading
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from rich.table import Table

from elastic_sps.io.connections import kafka_config
from elastic_sps.model.topology import Topology


class Feed:
    """Follows sps.stats and sps.analysis in a thread; keeps the newest of each."""

    def __init__(self, bootstrap: str, stats_topic: str, analysis_topic: str) -> None:
        self.stats: dict[str, Any] | None = None
        self.first_interval: int | None = None  # the header counts seconds from it
        self.analysis: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._c = Consumer(
            kafka_config(bootstrap, **{"group.id": "sps-live-view", "enable.auto.commit": False})
        )
        self._c.assign([TopicPartition(stats_topic, 0, 0), TopicPartition(analysis_topic, 0, 0)])
        self._stats_topic = stats_topic
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            m = self._c.poll(0.2)
            if m is None or m.error():
                continue
            try:
                doc = json.loads(m.value() or b"null")
            except ValueError:
                continue
            if m.topic() == self._stats_topic:
                if self.stats is None or doc.get("interval", -1) >= self.stats["interval"]:
                    self.stats = doc
                    if self.first_interval is None:
                        self.first_interval = int(doc["interval"])
            else:
                self.analysis = doc

    def close(self) -> None:
        self._stop.set()
        self._t.join(2)
        self._c.close()


def render(
    topo: Topology, feed: Feed, extra: str = "", restarts: dict[str, int] | None = None
) -> Table:
    s, a = feed.stats, feed.analysis
    title = "elastic-sps"
    if s:
        td = s["td"]
        shed = s.get("shed_events", 0)
        ratio = shed / s["input_events"] if s["input_events"] else 0.0
        pred = a["predicted_input"] / td if a else float("nan")
        lat = s.get("latency_ms_mean")
        p99 = s.get("latency_ms_p99")
        title = (
            f"{(s['interval'] - (feed.first_interval or s['interval'])) * td:,.0f} s in  "
            f"input {s['input_events'] / td:,.0f}/s  "
            f"predicted {pred:,.0f}/s  shed {ratio:.1%}  latency "
            f"{'-' if lat is None else f'{lat:,.0f}'} ms (p99 "
            f"{'-' if p99 is None else f'{p99:,.0f}'})  {extra}"
        )
    if restarts:
        title += "  restarts " + " ".join(f"{n}={k}" for n, k in restarts.items())
    t = Table(title=title)
    for col in ("operator", "active/pool", "needed", "queue", "throughput/s", "et ms", "expired"):
        t.add_column(col, justify="right" if col != "operator" else "left")
    for op in topo.operators:
        o = (s or {}).get("operators", {}).get(op.name, {})
        need = (a or {}).get("operators", {}).get(op.name, {}).get("replicas", "-")
        td = (s or {}).get("td", 1.0)
        t.add_row(
            op.name,
            f"{o.get('active_replicas', '-')}/{op.max_replicas}",
            str(need),
            f"{o.get('queued', 0):,.0f}",
            f"{o.get('processed', 0) / td:,.0f}",
            f"{o.get('et_ms', 0):.2f}",
            f"{o.get('expired', 0):,.0f}",
        )
    return t
