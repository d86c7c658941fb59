"""Nexmark q5 and q7 in quix-streams, in its natural form: event time from the bid's
``dateTime``, ``group_by`` to re-key (a repartition topic), its windows with ``.final()``
closing by the partition's time, not the key's (results when a window closes, after
``--grace-ms``), in two stages as the queries need (per auction, then per window,
through a topic keyed by window). The aggregates are ``sps_nexmark.queries``' own
classes, so the engines run the same Python per event. Run by
``benchmarks/bench_nexmark.py`` in the peers' virtualenv, a process per input partition
(one consumer group).
"""

from __future__ import annotations

import argparse
import tempfile
from typing import Any

from quixstreams import Application
from sps_nexmark import queries as q

# a window closes when its partition's time passes its end; by default ("key") only when
# a later event of the same key comes, and the second stage's keys (a window each) never
# get one
CLOSING = "partition"
# the second stage's topic interleaves both processes' first-stage results, whose times
# differ by how far one process is behind the other: with 5 s, 7 s-late results of q5
# were dropped at saturation (windows left without rows); 30 s held in the runs tried
MID_GRACE_MS = 30_000


def _event_time(value: Any, headers: Any, timestamp: float, kind: Any) -> int:
    for field in ("bid", "newAuction", "newPerson"):
        if field in value:
            return int(value[field]["dateTime"])
    return int(timestamp)


def _reducer(agg: Any) -> tuple[Any, Any]:
    """A ``queries`` aggregate as quix's reducer and initializer."""
    return (lambda acc, v: agg.add(acc, v)), (lambda v: agg.add(agg.initial(), v))


def q5(app: Any, sdf: Any, mid: Any, grace: int) -> Any:
    counts = sdf.group_by("auction").hopping_window(10_000, 2_000, grace).count().final(CLOSING)
    counts.apply(
        lambda v, key, ts, h: {"key": str(key), "value": v["value"], "start": v["start"]},
        metadata=True,
    ).to_topic(mid, key=lambda v: str(v["start"]))
    reduce, init = _reducer(q.HotItems())
    by_window = app.dataframe(mid).tumbling_window(2_000, MID_GRACE_MS)
    rows = by_window.reduce(reduce, init).final(CLOSING)
    return rows.apply(
        lambda w: [{"auction": a, "num": w["value"]["num"], "window_start": w["start"],
                    "window_end": w["start"] + 10_000} for a in w["value"]["auctions"]],
        expand=True,
    )  # fmt: skip


def q7(app: Any, sdf: Any, mid: Any, grace: int) -> Any:
    reduce, init = _reducer(q.MaxBids())
    by_auction = sdf.group_by("auction").tumbling_window(10_000, grace)
    per_auction = by_auction.reduce(reduce, init).final(CLOSING)
    per_auction.apply(lambda w: {"window": w["start"], **w["value"]}).to_topic(
        mid, key=lambda v: str(v["window"])
    )
    by_window = app.dataframe(mid).tumbling_window(10_000, MID_GRACE_MS)
    rows = by_window.reduce(reduce, init).final(CLOSING)
    return rows.apply(
        lambda w: [{**b, "window_start": w["start"], "window_end": w["start"] + 10_000}
                   for b in w["value"]["bids"]],
        expand=True,
    )  # fmt: skip


QUERIES = {"q5": q5, "q7": q7}


def main() -> None:
    ap = argparse.ArgumentParser()
    for flag in ("--bootstrap", "--src", "--dst", "--group", "--query"):
        ap.add_argument(flag, required=True)
    ap.add_argument("--state-dir", default=None)
    ap.add_argument("--grace-ms", default="0")
    args = ap.parse_args()
    app = Application(
        broker_address=args.bootstrap,
        consumer_group=args.group,
        auto_offset_reset="earliest",
        auto_create_topics=True,  # the repartition and changelog topics
        state_dir=args.state_dir or tempfile.mkdtemp(prefix="sps-quix-nexmark-"),
    )
    src = app.topic(args.src, value_deserializer="json", timestamp_extractor=_event_time)
    dst = app.topic(args.dst, value_serializer="json")
    # the second stage's input: quix-streams allows one group_by per dataframe, so the
    # per-window stage reads the first's results from a topic keyed by window
    mid = app.topic(
        f"{args.src}.{args.query}-by-window",
        value_deserializer="json",
        value_serializer="json",
        key_serializer="str",
        key_deserializer="str",
    )
    sdf = app.dataframe(src)
    sdf = sdf.filter(lambda e: "bid" in e).apply(lambda e: e["bid"])
    QUERIES[args.query](app, sdf, mid, int(args.grace_ms)).to_topic(dst)
    app.run()


if __name__ == "__main__":
    main()
