"""Nexmark q5 and q7 in Bytewax, in its natural form: the Kafka source, ``key_on``, its
windowing operators (``count_window``, ``fold_window``) on an ``EventClock`` of the bid's
``dateTime`` (waiting ``NEXMARK_GRACE_MS``), in two stages as the queries need (per
auction, then per window). The aggregates are ``sps_nexmark.queries``' own classes. Run by
``benchmarks/bench_nexmark.py`` in the peers' virtualenv as
``python -m bytewax.run bytewax_nexmark:flow -i K -a "host:port;..."`` (one process per
input partition), configured by variables (bytewax imports the flow): the query's
``NEXMARK_QUERY`` and ``NEXMARK_GRACE_MS``, the run's ``BYTEWAX_BOOTSTRAP``, ``_SRC``,
``_DST`` and ``_GROUP`` (``benchmarks/harness/engines.py`` sets those).
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from typing import Any

import bytewax.operators as op
import bytewax.operators.windowing as win
from bytewax.connectors.kafka import KafkaSinkMessage
from bytewax.connectors.kafka import operators as kop
from bytewax.dataflow import Dataflow
from sps_nexmark import queries as q

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


WAIT = timedelta(milliseconds=int(os.environ.get("NEXMARK_GRACE_MS", "0")))


def _clock(ms_of: Any) -> win.EventClock:
    return win.EventClock(lambda v: EPOCH + timedelta(milliseconds=ms_of(v)), WAIT)


def _start_ms(win_id: int, offset_ms: int) -> int:
    # a window's id counts offsets from align_to (SlidingWindower's rule)
    return win_id * offset_ms


def q5(bids: Any) -> Any:
    sliding = win.SlidingWindower(timedelta(seconds=10), timedelta(seconds=2), EPOCH)
    counts = win.count_window(
        "counts", bids, _clock(lambda b: b["dateTime"]), sliding, lambda b: str(b["auction"])
    )
    per_window = op.map(
        "by_window",
        counts.down,
        lambda kv: (str(_start_ms(kv[1][0], 2000)),
                    {"key": kv[0], "value": kv[1][1], "start": _start_ms(kv[1][0], 2000)}),
    )  # fmt: skip
    hot = q.HotItems()
    tumbling = win.TumblingWindower(timedelta(seconds=2), EPOCH)
    top = win.fold_window(
        "hottest", per_window, _clock(lambda r: r["start"]), tumbling, hot.initial, hot.add,
        hot.merge,
    )  # fmt: skip
    return op.flat_map(
        "rows",
        top.down,
        lambda kv: [{"auction": a, "num": kv[1][1]["num"], "window_start": int(kv[0]),
                     "window_end": int(kv[0]) + 10_000} for a in kv[1][1]["auctions"]],
    )  # fmt: skip


def q7(bids: Any) -> Any:
    top = q.MaxBids()
    tumbling = win.TumblingWindower(timedelta(seconds=10), EPOCH)
    keyed = op.key_on("by_auction", bids, lambda b: str(b["auction"]))
    per_auction = win.fold_window(
        "per_auction", keyed, _clock(lambda b: b["dateTime"]), tumbling, top.initial, top.add,
        top.merge,
    )  # fmt: skip
    partial = op.map(
        "partial",
        per_auction.down,
        lambda kv: (str(_start_ms(kv[1][0], 10_000)),
                    {"window": _start_ms(kv[1][0], 10_000), **kv[1][1]}),
    )  # fmt: skip
    highest = win.fold_window(
        "highest", partial, _clock(lambda r: r["window"]), tumbling, top.initial, top.add,
        top.merge,
    )  # fmt: skip
    return op.flat_map(
        "rows",
        highest.down,
        lambda kv: [{**b, "window_start": int(kv[0]), "window_end": int(kv[0]) + 10_000}
                    for b in kv[1][1]["bids"]],
    )  # fmt: skip


def build(query: str, bootstrap: str, src: str, dst: str, group: str) -> Dataflow:
    flow = Dataflow(f"nexmark-{query}")
    msgs = kop.input("in", flow, brokers=[bootstrap], topics=[src],
                     add_config={"group.id": group})  # fmt: skip
    events = op.map("decode", msgs.oks, lambda m: json.loads(m.value))
    bids = op.filter_map("bids", events, lambda e: e.get("bid"))
    rows = {"q5": q5, "q7": q7}[query](bids)
    out = op.map("encode", rows, lambda r: KafkaSinkMessage(None, json.dumps(r).encode()))
    kop.output("out", out, brokers=[bootstrap], topic=dst)
    return flow


if "NEXMARK_QUERY" in os.environ:
    flow = build(
        os.environ["NEXMARK_QUERY"],
        *(os.environ[f"BYTEWAX_{k}"] for k in ("BOOTSTRAP", "SRC", "DST", "GROUP")),
    )
