"""Input-rate traces: CSV loading with clear errors, rescaling, and a seeded spike generator.

A trace is a sequence of slots of ``slot_s`` seconds, each holding the events that arrived
in it. CSV files have a time column (``timestamp``, a date-time, or ``time``, seconds) and
a ``value`` column.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

import numpy as np

TIME_COLUMNS = ("timestamp", "time")


class TraceError(ValueError):
    """A trace that cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class Trace:
    name: str
    values: np.ndarray  # events per slot
    slot_s: float = 1.0

    @property
    def duration_s(self) -> float:
        return len(self.values) * self.slot_s

    @property
    def peak_eps(self) -> float:
        return float(self.values.max()) / self.slot_s if len(self.values) else 0.0

    def rescaled(self, peak_eps: float) -> Trace:
        """Scale so that the busiest slot runs at ``peak_eps`` events/s."""
        if not (math.isfinite(peak_eps) and peak_eps > 0):
            raise TraceError(f"--peak-rate must be a positive number, got {peak_eps}")
        if self.peak_eps <= 0:
            raise TraceError(f"trace {self.name}: all values are 0, cannot rescale")
        return replace(self, values=self.values * (peak_eps / self.peak_eps))

    def per_interval(self, td: float) -> np.ndarray:
        """Events per interval of ``td`` seconds, spreading each slot evenly over its time."""
        if td <= 0:
            raise TraceError(f"td must be positive, got {td}")
        edges = np.arange(0.0, self.duration_s + 1e-9, td)
        if edges[-1] < self.duration_s - 1e-9:
            edges = np.append(edges, self.duration_s)
        cum = np.concatenate(([0.0], np.cumsum(self.values)))
        slot_edges = np.arange(len(self.values) + 1) * self.slot_s
        cum_at = np.interp(edges, slot_edges, cum)
        return np.diff(cum_at)


def load_csv(path: str | Path, slot_s: float = 1.0) -> Trace:
    path = Path(path)
    if slot_s <= 0:
        raise TraceError(f"--slot-seconds must be positive, got {slot_s}")
    try:
        fh = path.open(newline="")
    except OSError as exc:
        raise TraceError(f"trace {path}: cannot open ({exc.strerror})") from exc
    with fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None:
            raise TraceError(f"trace {path}: empty file (line 1: expected a header)")
        cols = [h.strip().lower() for h in header]
        if "value" not in cols:
            raise TraceError(f"trace {path}, line 1: no 'value' column in header {header}")
        if not any(c in cols for c in TIME_COLUMNS):
            raise TraceError(
                f"trace {path}, line 1: no time column ('timestamp' or 'time') in header {header}"
            )
        vcol = cols.index("value")
        values: list[float] = []
        for lineno, row in enumerate(reader, start=2):
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) <= vcol:
                raise TraceError(f"trace {path}, line {lineno}: missing value")
            try:
                v = float(row[vcol])
            except ValueError:
                raise TraceError(
                    f"trace {path}, line {lineno}: value {row[vcol]!r} is not a number"
                ) from None
            if not math.isfinite(v) or v < 0:
                raise TraceError(
                    f"trace {path}, line {lineno}: value {v} is negative or not finite"
                )
            values.append(v)
    if not values:
        raise TraceError(f"trace {path}: no data rows after the header")
    return Trace(path.stem, np.asarray(values, dtype=float), slot_s)


def bundled_names() -> list[str]:
    pkg = resources.files("elastic_sps") / "bundled_traces"
    return sorted(p.name[:-4] for p in pkg.iterdir() if p.name.endswith(".csv"))


def _search_dirs() -> list[Path]:
    from elastic_sps.io.local_settings import LocalSettings

    dirs = []
    if env := LocalSettings().trace_dir:
        dirs.append(Path(env))
    # The reference traces beside a checkout (never copied into the repository).
    dirs.append(Path(__file__).resolve().parents[3] / "shared" / "traces")
    return dirs


def load(name_or_path: str, slot_s: float = 1.0, peak_eps: float | None = None) -> Trace:
    """A bundled trace by name, a CSV by path, or a name found in ELASTIC_SPS_TRACE_DIR."""
    path = Path(name_or_path)
    if not path.exists():
        res = resources.files("elastic_sps") / "bundled_traces" / f"{name_or_path}.csv"
        if res.is_file():
            path = Path(str(res))
        else:
            found = [d / f"{name_or_path}.csv" for d in _search_dirs()]
            hit = next((p for p in found if p.exists()), None)
            if hit is None:
                raise TraceError(
                    f"unknown trace {name_or_path!r}: not a file; bundled: "
                    f"{', '.join(bundled_names())}"
                )
            path = hit
    trace = load_csv(path, slot_s)
    return trace.rescaled(peak_eps) if peak_eps is not None else trace


def spike_workload(
    duration_s: int = 3600,
    base_eps: float = 400.0,
    spikes: int = 3,
    height: float = 4.0,
    width_s: int = 180,
    ramp_s: int = 30,
    noise: float = 0.05,
    seed: int = 0,
    name: str = "spikes",
) -> Trace:
    """Spikes in the manner of Bodík et al. (SoCC 2010): a base load, then ``spikes``
    volume spikes at random onsets, each ramping up over ``ramp_s`` to ``height`` × base,
    holding for ``width_s`` and decaying over ``ramp_s``; multiplicative Gaussian noise.
    """
    if duration_s <= 0 or base_eps < 0 or height < 1 or width_s <= 0 or ramp_s < 0 or noise < 0:
        raise TraceError("spike workload: duration, width > 0; base, ramp, noise >= 0; height >= 1")
    rng = np.random.default_rng(seed)
    t = np.arange(duration_s, dtype=float)
    factor = np.ones(duration_s)
    span = width_s + 2 * ramp_s
    if spikes:
        # Evenly spaced segments with a random onset inside each keep spikes apart.
        seg = duration_s / spikes
        for k in range(spikes):
            lo = k * seg + 0.1 * seg
            hi = max(lo, (k + 1) * seg - span - 0.1 * seg)
            start = rng.uniform(lo, hi)
            up = np.clip((t - start) / max(ramp_s, 1), 0, 1)
            down = np.clip((start + ramp_s + width_s + ramp_s - t) / max(ramp_s, 1), 0, 1)
            factor += (height - 1) * np.minimum(up, down)
    rate = base_eps * factor * np.clip(1 + noise * rng.standard_normal(duration_s), 0, None)
    return Trace(name, np.round(rate), 1.0)


def write_csv(trace: Trace, path: str | Path) -> None:
    with Path(path).open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["time", "value"])
        for k, v in enumerate(trace.values):
            w.writerow([f"{k * trace.slot_s:g}", f"{v:g}"])
