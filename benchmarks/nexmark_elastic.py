"""Elasticity on Nexmark, live: ``compare --live`` on a query's topology
(``examples/nexmark``) with generated events under a spiky rate, each policy's run
checked against the reference (``sps_nexmark.check``), beside the simulator's forecast.

Run: PYTHONPATH=. .venv/bin/python benchmarks/nexmark_elastic.py --query q5
     [--trace short-spikes] [--peak-rate 3000] [--duration 60]
     [--policies static:1,static:4,pa-sps,ds2] [--json]

The events file is long enough that no run starts it again (the reference is over the
first ``sent`` events of the file), at 1,000 events per second of event time so windows
close during the run. Per policy: saved resources, mean and p99 latency, rescales, the
simulator's saved resources for the same trace, and whether the outputs are exact.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from sps_nexmark.check import compare
from sps_nexmark.generate import Generator

from benchmarks.nexmark_live import output_rows
from elastic_sps.services.ensemble import live_compare

ROOT = Path(__file__).resolve().parents[1] / "examples" / "nexmark"


def checked(row: dict[str, Any], query: str, events: list[dict]) -> dict[str, Any]:
    """One policy's figures, live and forecast, with its outputs judged."""
    report = json.loads((Path(row["run_dir"]) / "report.json").read_text())
    got = output_rows(report["outputs"][f"nexmark.{query}"])
    verdict = compare(query, got, events[: report["sent"]])
    live, sim = row["live"], row["simulated"]
    return {
        "policy": row["policy"],
        "saved": _round(live["saved_resources"]),
        "latency_ms": _round(live["latency_ms"]),
        "latency_ms_p99": _round(live["latency_ms_p99"]),
        "rescales": live["rescales"],
        "lost": report["lost"],
        "forecast_saved": _round(sim.get("saved_resources")),
        "exact": verdict["exact"],
        "windows_closed": verdict.get("windows_closed"),
    }


def _round(x: float | None) -> float | None:
    return None if x is None else round(float(x), 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--query", default="q5")
    ap.add_argument("--trace", default="short-spikes")
    ap.add_argument("--peak-rate", type=float, default=3000.0)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--events", type=int, default=250_000)
    ap.add_argument("--policies", default="static:1,static:4,pa-sps,ds2")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    events = list(Generator(1000.0, seed=9).events(args.events))
    folder = Path(tempfile.mkdtemp(prefix=f"nexmark-elastic-{args.query}-"))
    path = folder / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    sc = live_compare.Scenario(
        str(ROOT / f"{args.query}.yaml"), args.trace, args.duration, args.peak_rate, 1.0
    )
    specs = [p.strip() for p in args.policies.split(",") if p.strip()]
    rows = live_compare.run(sc, specs, folder, events_file=path)
    out = [checked(r, args.query, events) for r in rows]
    if args.json:
        print(json.dumps(out))
        return
    for r in out:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
