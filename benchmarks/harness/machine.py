"""How fast the machine runs a fixed piece of Python work, sampled all through a
comparison. On a shared virtual machine the host's load changes what a CPU second buys
(the same code's CPU time moves with it, by run and by core); a figure per CPU second
then moves with the machine as much as with the engine. The probe is a process per core
(the role ``probe``, which no CPU figure counts) that times one unit of work every
``every_s`` seconds by its own CPU clock; a row carries the median unit over its
measured phase (``probe_ms``), and ``at_fastest`` rescales a row's figure per CPU second
to the fastest phase of the invocation."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

UNIT = 200_000  # loop turns of ``unit_ms``: about 20 ms on this machine kind at its fastest


def unit_ms(turns: int = UNIT) -> float:
    """CPU ms of a fixed loop of integer arithmetic and dictionary stores (the kind of
    work an interpreter does per event), by this process's CPU clock, not the wall's."""
    t = time.process_time()
    s, d = 0, {}
    for i in range(turns):
        s += i * i
        d[i & 1023] = s
    return 1000 * (time.process_time() - t)


def median_between(samples: Sequence[tuple[float, float]], t0: float, t1: float) -> float | None:
    """The median unit (ms) of the samples ``(wall time, ms)`` taken in [t0, t1]; None if
    none was."""
    inside = [ms for t, ms in samples if t0 <= t <= t1]
    return round(statistics.median(inside), 2) if inside else None


def at_fastest(rows: list[dict[str, Any]], figure: str, into: str, per_cpu: bool = True) -> None:
    """Each row's ``figure`` as it would be had its phase run at the fastest probe
    reading among ``rows``, written to ``into``: a figure per CPU second (``per_cpu``)
    times ``probe_ms`` / the least ``probe_ms``, a CPU time per event divided by it (to
    4 significant decimals). Rows without both are left alone."""
    probes = [r["probe_ms"] for r in rows if r.get("probe_ms") and r.get(figure)]
    if not probes:
        return
    fastest = min(probes)
    for r in rows:
        if r.get("probe_ms") and r.get(figure):
            slower = r["probe_ms"] / fastest
            r[into] = round(r[figure] * slower) if per_cpu else round(r[figure] / slower, 4)


class SpeedProbe:
    """A probe process per core, each held to its core (the cores of a virtual machine
    change speed apart, and the engines' processes move between them), and their
    samples together, read as they come."""

    def __init__(self, every_s: float = 0.25) -> None:
        self.samples: list[tuple[float, float]] = []
        cores = sorted(os.sched_getaffinity(0))
        self._procs = [
            subprocess.Popen(
                [sys.executable, "-m", "benchmarks.harness.machine", "--every", str(every_s),
                 "--core", str(core)],
                stdout=subprocess.PIPE,
                text=True,
            )
            for core in cores
        ]  # fmt: skip
        self._readers = [threading.Thread(target=self._read, args=(p,), daemon=True)
                         for p in self._procs]  # fmt: skip
        for reader in self._readers:
            reader.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            t, ms = line.split()
            self.samples.append((float(t), float(ms)))

    def median_between(self, t0: float, t1: float) -> float | None:
        return median_between(list(self.samples), t0, t1)

    def stop(self) -> None:
        for proc in self._procs:
            proc.terminate()
            proc.wait(10)
        for reader in self._readers:
            reader.join(5)

    def __enter__(self) -> SpeedProbe:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description="print (wall time, unit ms) every --every s")
    ap.add_argument("--every", type=float, default=0.25)
    ap.add_argument("--core", type=int, help="run on this core only")
    args = ap.parse_args()
    if args.core is not None:
        os.sched_setaffinity(0, {args.core})
    while True:
        ms = unit_ms()
        print(f"{time.time():.3f} {ms:.3f}", flush=True)
        time.sleep(args.every)


if __name__ == "__main__":
    main()
