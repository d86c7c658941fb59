"""Nexmark queries live against the reference: each query's topology (``examples/nexmark``)
under ``demo`` on a generated file and a spiky trace, its output topic against
``sps_nexmark.reference`` for every row (stateless and joined queries) or every window
that closed (windowed ones).

Run: PYTHONPATH=. .venv/bin/python benchmarks/nexmark_live.py [--queries q0,q3,q4,q5,q6,q7,q8]
     [--events 60000] [--rate 200] [--peak-rate 1500] [--duration 30] [--json]

``sps_nexmark.check`` judges: rows as multisets; a window counts as closed when the run
output a row for it; an updating query (q4, q6) by each key's newest update (a repeat
after a crash carries the same id and value; repeats are dropped by id first).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from sps_nexmark.check import compare
from sps_nexmark.generate import Generator

from elastic_sps.services.ensemble import demo

ROOT = Path(__file__).resolve().parents[1] / "examples" / "nexmark"


def output_rows(path: str) -> list[dict[str, Any]]:
    """A run's rows of one output topic, each id's first (a repeat carries its value)."""
    seen: dict[str, Any] = {}
    for line in Path(path).read_text().splitlines():
        row = json.loads(line)
        seen.setdefault(row["id"], row["value"])
    return list(seen.values())


def run(query: str, args: argparse.Namespace, events: list[dict], events_file: str) -> dict:
    out = demo.run(
        topology=str(ROOT / f"{query}.yaml"),
        trace_name=args.trace,
        duration=args.duration,
        peak_rate=args.peak_rate,
        live=False,
        drain_s=120,
        compare_static=False,
        warmup_s=2,
        events_file=events_file,
        cycle=False,  # the reference is over the file's first `sent` events
        run_dir=Path(tempfile.mkdtemp(prefix=f"nexmark-{query}-")),
    )
    rep = out["report"]
    sent = events[: rep["sent"]]
    got = output_rows(rep["outputs"][f"nexmark.{query}"])
    return {
        "query": query,
        "sent": rep["sent"],
        "lost": rep["lost"],
        "rescales": rep["rescale_timeline"]["changes"],
        "state_moves": rep.get("state_moves", {}).get("moves"),
        "latency_ms_p99": rep.get("latency_ms_p99"),
        **compare(query, got, sent),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--queries", default="q0,q3,q4,q5,q6,q7,q8")
    ap.add_argument("--events", type=int, default=60_000)
    # about the replay's own rate: event time keeps pace with the run, so windows close
    ap.add_argument("--rate", type=float, default=200.0, help="events per second of event time")
    ap.add_argument("--peak-rate", type=float, default=1500.0)
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--trace", default="short-spikes")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    events = list(Generator(args.rate, seed=3).events(args.events))
    path = Path(tempfile.mkdtemp()) / "nexmark.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    rows = [run(q.strip(), args, events, str(path)) for q in args.queries.split(",")]
    print(json.dumps(rows, indent=None if args.json else 1))


if __name__ == "__main__":
    main()
