"""Where the dataplane's time goes at saturation, sampled (py-spy), not guessed.

Run: PYTHONPATH=. .venv/bin/python benchmarks/profile_dataplane.py [--events 40000]
     [--ids] [--chain] [--admission entry] [--nexmark q5] [--json]
     (needs py-spy: .venv/bin/pip install py-spy; as root)

The elastic-sps peer of ``bench_peers.py`` (the Twitter application, ingress and PySpark
dataplane, 2 replicas per operator, the id ledger off unless ``--ids``; ``--chain``: the four
operators chained into one, 2 replicas; ``--admission entry``: admission as its first step,
no ingress, as ``bench_peers.py``'s ``elastic-sps-entry``) is fed ``--events`` at once (``--nexmark Q``:
``bench_nexmark.py``'s ``elastic-sps-entry`` peer of query Q instead, fed a saturation
phase of that many events and the flush closing its windows); meanwhile py-spy samples
every Python process under the dataplane (the driver, the stream readers and Spark's
Python workers: ``--subprocesses``) ``--rate`` times a second (100), the thread holding
the GIL. Each sample's stack is put in the first category, innermost frame first, whose
pattern a frame's file or function matches. Printed: each category's share of the
samples; ``--top CATEGORY`` lists that category's busiest frames.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks import bench_nexmark as nexmark
from benchmarks.bench_peers import elastic_sps, send_all
from benchmarks.harness.runs import fresh_tag, running
from elastic_sps.io import embedded

ROOT = Path(__file__).resolve().parents[1]
PY_SPY = ROOT / ".venv" / "bin" / "py-spy"
# (category, substrings of a frame "function (file:line)"), tried innermost frame first
CATEGORIES = (
    ("operator (user code)", ("sps_twitter/", "sps_nexmark/")),
    ("envelope encode/decode", ("io/envelope.py", "json/")),
    ("id ledger", ("io/id_ledger.py",)),
    ("Redis", ("redis/",)),
    ("Kafka produce/consume", ("confluent_kafka", "io/tracked_producer.py", "io/kafka_io.py")),
    ("routing", ("control/grouping.py",)),
    ("replica loop (dataplane)", ("services/dataplane/",)),
    ("Spark / PySpark", ("pyspark/", "py4j/")),
)


def _frames(stack: str) -> list[str]:
    """Innermost first (py-spy's raw format lists the outermost first), without the
    ``process N:"command line"`` root that ``--subprocesses`` adds."""
    return [f for f in stack.split(";")[::-1] if not f.startswith("process ")]


def categorise(stack: str) -> str:
    """The category of one sample (of the thread holding its process's GIL)."""
    frames = _frames(stack)
    for frame in frames:
        for name, patterns in CATEGORIES:
            if any(p in frame for p in patterns):
                return name
    return "other"


def shares(raw: Path) -> dict[str, float]:
    counts: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if stack and n.isdigit():
            counts[categorise(stack)] += int(n)
    busy = sum(counts.values()) or 1
    out = {k: round(v / busy, 3) for k, v in counts.most_common()}
    return out


def top_frames(raw: Path, category: str, k: int = 12) -> list[tuple[str, float]]:
    """The innermost frames of ``category``'s samples that hold the most samples: where in
    that category the time goes."""
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not (stack and n.isdigit()) or categorise(stack) != category:
            continue
        total += int(n)
        frames = _frames(stack)
        patterns = dict(CATEGORIES).get(category, ("",))  # "other": the innermost frame
        hit = next((f for f in frames if any(p in f for p in patterns)), "(no Python frame)")
        counts[hit] += int(n)
    return [(f, round(v / max(1, total), 3)) for f, v in counts.most_common(k)]


def _sampling(pid: int, raw: Path, rate: int) -> subprocess.Popen[bytes]:
    """py-spy on the process tree under ``pid``, 2 s to attach; only the thread holding
    each process's GIL (``--gil``): py-spy's idle test takes a thread sleeping or waiting
    on a queue, a socket or librdkafka for a running one."""
    sampling = ["--subprocesses", "--gil", "--rate", str(rate), "--nonblocking", "--format", "raw"]
    spy = subprocess.Popen(
        [str(PY_SPY), "record", "--pid", str(pid), *sampling, "--output", str(raw)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(2)
    return spy


def _stopped(spy: subprocess.Popen[bytes]) -> None:
    spy.send_signal(2)  # SIGINT: py-spy writes what it sampled
    spy.wait(60)


def _peers(args: argparse.Namespace, bootstrap: str, redis_url: str, raw: Path) -> float:
    """The Twitter chain of ``bench_peers.py``: seconds its events took."""
    env = {"SPS_TRACK_IDS": "true" if args.ids else "false", "SPS_ADMISSION": args.admission}
    pipe = elastic_sps(bootstrap, redis_url, fresh_tag("prof"), env, args.chain)
    with running(pipe, bootstrap) as (collector, producer):
        send_all(producer, pipe, collector, 0, 500)  # warm
        spy = _sampling(pipe.procs[0].proc.pid, raw, args.rate)  # type: ignore[union-attr]
        t0, last = send_all(producer, pipe, collector, 10_000_000, args.events)
        _stopped(spy)
    return last - t0


def _nexmark(args: argparse.Namespace, bootstrap: str, redis_url: str, raw: Path) -> float:
    """``bench_nexmark.py``'s entry-step peer: a paced warm-up, then the burst sampled."""
    pipe = nexmark.PEERS["elastic-sps-entry"](bootstrap, redis_url, fresh_tag("prof"), args.nexmark)
    with running(pipe, bootstrap) as (collector, producer):
        warm = nexmark.Phase(args.nexmark, 5000, 1000.0, nexmark.BASE_TIME_MS, 1)
        warm.feed(producer, pipe.src, 1000.0)
        collector.wait_for_windows(warm.windows, pipe, 300)
        burst = nexmark.Phase(args.nexmark, args.events, 1000.0, warm.next_base(), 2)
        spy = _sampling(pipe.procs[0].proc.pid, raw, args.rate)  # type: ignore[union-attr]
        t0 = time.time()
        burst.feed(producer, pipe.src, None)
        last = collector.wait_for_windows(burst.windows, pipe, 300)
        _stopped(spy)
    return last - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=40_000)
    ap.add_argument("--ids", action="store_true", help="with the id ledger on")
    ap.add_argument("--chain", action="store_true", help="the four operators chained")
    ap.add_argument(
        "--admission",
        default="ingress",
        choices=("ingress", "entry"),
        help="SPS_ADMISSION: the ingress service, or admission as the first step",
    )
    ap.add_argument("--nexmark", help="profile this Nexmark query's pipeline instead (q5, q7)")
    ap.add_argument("--rate", type=int, default=100, help="py-spy's samples a second")
    ap.add_argument("--top", help="a category whose busiest frames to list too")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    raw = Path(tempfile.mkdtemp(prefix="sps-profile-")) / "dataplane.txt"
    with embedded.kafka_broker() as bootstrap, embedded.redis_server() as redis_url:
        if args.nexmark:
            took = _nexmark(args, bootstrap, redis_url, raw)
        else:
            took = _peers(args, bootstrap, redis_url, raw)
    out: dict = {"events_per_s": round(args.events / took), "ids": args.ids}
    out |= {"chain": args.chain, "nexmark": args.nexmark}
    out |= shares(raw)
    if args.top:
        out["top"] = top_frames(raw, args.top)
    print(json.dumps(out) if args.json else "\n".join(f"{k}: {v}" for k, v in out.items()))


if __name__ == "__main__":
    main()
