"""The shedding simulator of LAS §5.1-5.2, in virtual time (no busy waiting).

One operator instance serves admitted tuples FIFO; tuple i arriving at a_i starts at
max(a_i, previous finish) and runs w(t_i). Messages from the operator (a stable sketch, a
Δ reply) reach the shedder at the completion time of the tuple that caused them.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from elastic_sps.las.operator_side import LasOperator
from elastic_sps.las.shedder import (
    AverageQueuingLatency,
    BaseLineShedder,
    FullKnowledgeShedder,
    LasShedder,
    Shedder,
    StrawManShedder,
)
from elastic_sps.las.sketch import SketchPair

SHEDDERS = ("las", "strawman", "baseline", "full")
DISTRIBUTIONS = ("uniform", "zipf-0.5", "zipf-1.0", "zipf-1.5", "zipf-2.0", "zipf-2.5", "zipf-3.0")


BOOTSTRAPS = ("declared", "nop", "oracle")


@dataclass(frozen=True)
class Setup:
    """§5.1 defaults (the time-series scenario of Fig. 6 uses τ = 64 ms)."""

    distribution: str = "zipf-1.0"
    items: int = 4096
    tuples: int = 32768
    wn: int = 64
    wmin_ms: float = 0.1
    wmax_ms: float = 6.4
    underprovision: float = 0.25
    tau_ms: float = 6.4
    window: int = 1024  # N
    tolerance: float = 0.05  # μ
    delta: float = 0.1
    epsilon: float = 0.05
    # Before the first sketch: "declared" charges the operator's benchmarked cost (the mean
    # of its wn item costs, with no knowledge of the stream's frequencies); "nop" is
    # Listing 3.2 exactly; "oracle" charges the stream's true W̄ (what only Straw-Man may
    # know: kept to compare, never the default).
    bootstrap: str = "declared"
    # Until the first sketch, a Δ probe on every k-th admitted tuple (0: none, as Listing
    # 3.2; see LasShedder).
    bootstrap_probe_every: int = 8
    # Once sketches flow, keep re-anchoring Ĉ with one Δ probe at a time (LasShedder's
    # keep_probing; False: Listing 3.2, probes only after a new sketch).
    keep_probing: bool = True

    def __post_init__(self) -> None:
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(f"distribution {self.distribution!r}: choose from {DISTRIBUTIONS}")
        if self.items < self.wn or self.wn < 1:
            raise ValueError("need items >= wn >= 1")
        if not 0 < self.wmin_ms <= self.wmax_ms:
            raise ValueError("need 0 < wmin <= wmax")
        if self.underprovision >= 1:
            raise ValueError("under-provisioning must be below 1 (100 %)")
        if self.bootstrap not in BOOTSTRAPS:
            raise ValueError(f"bootstrap {self.bootstrap!r}: choose from {BOOTSTRAPS}")

    def declared_cost_s(self) -> float:
        """The operator's benchmark: its wn item costs averaged, unweighted."""
        return (self.wmin_ms + self.wmax_ms) / 2.0 / 1000.0


@dataclass
class Stream:
    keys: np.ndarray  # item per tuple
    arrivals: np.ndarray  # seconds
    durations: np.ndarray  # w(t) seconds, per tuple (phases may change it)
    duration_of_item: np.ndarray  # base w per item
    mean_duration: float  # W̄ of the base stream


def item_probabilities(distribution: str, n: int) -> np.ndarray:
    if distribution == "uniform":
        return np.full(n, 1.0 / n)
    alpha = float(distribution.split("-", 1)[1])
    p = 1.0 / np.arange(1, n + 1) ** alpha
    return p / p.sum()


def associate(setup: Setup, rng: np.random.Generator) -> np.ndarray:
    """§5.1: for each of the wn durations, n/wn items picked uniformly at random."""
    values = np.linspace(setup.wmin_ms, setup.wmax_ms, setup.wn) / 1000.0
    perm = rng.permutation(setup.items)
    w = np.empty(setup.items)
    for k, chunk in enumerate(np.array_split(perm, setup.wn)):
        w[chunk] = values[k]
    return w


def make_stream(setup: Setup, seed: int) -> Stream:
    rng = np.random.default_rng(seed)
    w_item = associate(setup, rng)
    p = item_probabilities(setup.distribution, setup.items)
    keys = rng.choice(setup.items, size=setup.tuples, p=p)
    durations = w_item[keys]
    mean = float(durations.mean())
    gap = mean * (1.0 - setup.underprovision)
    arrivals = np.arange(setup.tuples) * gap
    return Stream(keys, arrivals, durations, w_item, mean)


def make_phase_stream(setup: Setup, seed: int, per_phase: int = 20_000) -> Stream:
    """Fig. 6: phases A-G of ``per_phase`` tuples each."""
    rng = np.random.default_rng(seed)
    w_item = associate(setup, rng)
    p = item_probabilities(setup.distribution, setup.items)
    n = 7 * per_phase
    keys = rng.choice(setup.items, size=n, p=p)
    durations = w_item[keys].copy()
    base_mean = float(durations[:per_phase].mean())
    under = [0.0, 0.5, 0.0, 0.0, -0.5, 0.0, 0.0]
    # D: the most frequent item (0) now costs w_max, and the w_max item what item 0 cost:
    # the item -> duration mapping changes, the keys do not (swapping both cancelled out,
    # leaving W̄ unchanged).
    heavy = int(np.flatnonzero(np.isclose(w_item, w_item.max()))[-1])
    d0 = 3 * per_phase
    swapped = w_item.copy()
    swapped[0], swapped[heavy] = w_item[heavy], w_item[0]
    durations[d0:] = swapped[keys[d0:]]
    durations[5 * per_phase : 6 * per_phase] *= 2.0  # F: the operator slows down 2x
    gaps = np.concatenate([np.full(per_phase, base_mean * (1 - u)) for u in under])
    arrivals = np.concatenate([[0.0], np.cumsum(gaps[:-1])])
    return Stream(keys, arrivals, durations, w_item, base_mean)


@dataclass
class Outcome:
    shedder: str
    dropped: np.ndarray  # bool per tuple
    queuing: np.ndarray  # seconds, per tuple (nan when dropped)
    completion: np.ndarray
    sketches: int = 0
    deltas: int = 0
    extra: dict[str, float] = field(default_factory=dict)

    def summary(self) -> dict[str, float]:
        kept = ~self.dropped
        return {
            "avg_queuing_latency_ms": 1000 * float(np.nanmean(self.queuing[kept]))
            if kept.any()
            else 0.0,
            "dropped_ratio": float(self.dropped.mean()),
            "avg_completion_latency_ms": 1000 * float(np.nanmean(self.completion[kept]))
            if kept.any()
            else 0.0,
        }

    def windows(self, size: int = 4000) -> tuple[np.ndarray, np.ndarray]:
        """Per jumping window: mean queuing latency (ms) of admitted tuples, dropped ratio."""
        q, d = [], []
        for s in range(0, len(self.dropped), size):
            kept = ~self.dropped[s : s + size]
            qq = self.queuing[s : s + size][kept]
            q.append(1000 * float(qq.mean()) if len(qq) else 0.0)
            d.append(float(self.dropped[s : s + size].mean()))
        return np.asarray(q), np.asarray(d)


def build_shedder(kind: str, setup: Setup, stream: Stream, seed: int) -> Shedder:
    goal = AverageQueuingLatency(setup.tau_ms / 1000.0)
    if kind == "las":
        boot = {
            "declared": setup.declared_cost_s(),
            "oracle": stream.mean_duration,
            "nop": None,
        }[setup.bootstrap]
        return LasShedder(
            goal,
            epsilon=setup.epsilon,
            bootstrap_mean=boot,
            bootstrap_probe_every=setup.bootstrap_probe_every,
            keep_probing=setup.keep_probing,
        )
    if kind == "strawman":
        return StrawManShedder(goal, stream.mean_duration)
    if kind == "full":
        # Exact w(t) per tuple, phases included: look it up by position.
        return FullKnowledgeShedder(goal, lambda idx: stream.durations[idx])
    if kind == "baseline":
        return BaseLineShedder(setup.underprovision, seed=seed)
    raise ValueError(f"unknown shedder {kind!r}; choose from {SHEDDERS}")


def run(kind: str, setup: Setup, stream: Stream, seed: int, chunk: int | None = None) -> Outcome:
    """One shedder on one stream, tuple by tuple through a FIFO operator.

    Tuples go to the shedder ``chunk`` at a time (vectorised); the operator's messages
    (sketches, Δ replies) reach it between chunks. LAS therefore takes one tuple at a
    time by default, so that each message arrives when it is due, as in the paper's
    simulator: delivered every 32 tuples (about 100 ms at §5.1's rates, 16 τ), the Δ
    replies leave Ĉ carrying its (1 + ε) over-charge and its estimate errors for that
    long, and LAS drops far more than Full Knowledge (figures: docs/measurements.md). The
    other shedders receive no messages, so 32 changes nothing."""
    shedder = build_shedder(kind, setup, stream, seed)
    if chunk is None:
        chunk = 1 if isinstance(shedder, LasShedder) else 32
    m = len(stream.keys)
    dropped = np.zeros(m, dtype=bool)
    queuing = np.full(m, np.nan)
    completion = np.full(m, np.nan)
    las = shedder if isinstance(shedder, LasShedder) else None
    wire = _Wire(las, setup, seed)
    # Full Knowledge looks durations up by tuple index, so it is fed indices as keys.
    feed_index = isinstance(shedder, FullKnowledgeShedder)
    finish = 0.0
    t0 = float(stream.arrivals[0])
    for s in range(0, m, chunk):
        e = min(m, s + chunk)
        wire.deliver(float(stream.arrivals[s]), first=s)
        keys = np.arange(s, e) if feed_index else stream.keys[s:e]
        decisions = shedder.shed_batch(keys, stream.arrivals[s:e])
        dropped[s:e] = decisions
        for i in range(s, e):
            if decisions[i - s]:
                continue
            a = float(stream.arrivals[i])
            start = finish if finish > a else a
            w = float(stream.durations[i])
            finish = start + w
            queuing[i] = start - a
            completion[i] = finish - a
            wire.executed(i, int(stream.keys[i]), w, finish, t0)
    out = Outcome(kind, dropped, queuing, completion)
    if wire.operator is not None:
        out.sketches = wire.operator.sketches_sent
        out.deltas = wire.seq - wire.operator.sketches_sent
    return out


class _Wire:
    """LAS's operator and the messages between it and the shedder: the Ĉ piggy-backed on
    admitted tuples one way, sketches and Δ replies the other, each delivered when due
    (the tuple that caused it completes). A no-op for the other shedders."""

    def __init__(self, las: LasShedder | None, setup: Setup, seed: int) -> None:
        self.las = las
        self.inbox: list[tuple[float, int, str, object]] = []  # (deliver_at, seq, kind, payload)
        self.seq = 0
        self.piggy: dict[int, float] = {}  # tuple index -> the Ĉ it carries
        self.first = 0  # the index of the batch's first tuple, for on_piggyback's k
        self.now = 0.0  # the completion time of the tuple being executed
        self.operator: LasOperator | None = None
        if las is None:
            return
        self.operator = LasOperator(
            publish_sketch=lambda pair: self.post("sketch", pair),
            send_delta=lambda d: self.post("delta", d),
            delta=setup.delta,
            epsilon=setup.epsilon,
            window=setup.window,
            tolerance=setup.tolerance,
            seed=seed,
        )
        las.on_piggyback = lambda k, c: self.piggy.__setitem__(self.first + k, c)

    def post(self, what: str, payload: object) -> None:
        heapq.heappush(self.inbox, (self.now, self.seq, what, payload))
        self.seq += 1

    def deliver(self, until: float, first: int) -> None:
        """Everything due by ``until`` to the shedder, before the batch from ``first``."""
        self.first = first
        while self.inbox and self.inbox[0][0] <= until:
            _, _, what, payload = heapq.heappop(self.inbox)
            if self.las is not None and what == "sketch":
                assert isinstance(payload, SketchPair)
                self.las.receive_sketch(payload)
            elif self.las is not None and what == "delta":
                self.las.apply_delta(float(payload))  # type: ignore[arg-type]

    def executed(self, i: int, key: int, w: float, finish: float, t0: float) -> None:
        """Tuple ``i`` ran for ``w`` and completed at ``finish``: the operator's update."""
        if self.operator is not None:
            self.now = finish
            self.operator.update(key, w, self.piggy.pop(i, None), completed_at=finish - t0)


def shedding_ratio(dropped: int, baseline_dropped: int) -> float | None:
    """§5.1: λ = (d^alg − d^BaseLine) / d^BaseLine; undefined (None) when Base Line drops
    nothing (an over-provisioned setup)."""
    if baseline_dropped <= 0:
        return None
    return (dropped - baseline_dropped) / baseline_dropped


def _aggregate(kind: str, rows: list[dict[str, float | None]]) -> dict[str, Any]:
    """Mean, min and max of each figure over the runs (None values left out)."""
    out: dict[str, Any] = {"shedder": kind, "runs": len(rows)}
    for key in rows[0]:
        vals = [v for r in rows if (v := r[key]) is not None]
        out[key] = float(np.mean(vals)) if vals else None
        if len(rows) > 1:
            out[f"{key}_min"] = float(np.min(vals)) if vals else None
            out[f"{key}_max"] = float(np.max(vals)) if vals else None
    return out


def summarise(kinds: tuple[str, ...], setup: Setup, runs: int, seed: int) -> list[dict[str, Any]]:
    """Each shedder on the same ``runs`` streams (seeds seed..seed+runs-1), with §5.1's
    figures per shedder: mean, min and max over the runs, the shedding ratio λ against
    Base Line's drops on the same stream and seed included."""
    rows: dict[str, list[dict[str, float | None]]] = {k: [] for k in kinds}
    for k in range(runs):
        stream = make_stream(setup, seed + k)
        base = int(run("baseline", setup, stream, seed + k).dropped.sum())
        for kind in kinds:
            o = run(kind, setup, stream, seed + k)
            row: dict[str, float | None] = dict(o.summary())
            row["shedding_ratio"] = shedding_ratio(int(o.dropped.sum()), base)
            rows[kind].append(row)
    return [_aggregate(kind, rows[kind]) for kind in kinds]


def summarise_runs(kind: str, setup: Setup, runs: int, seed: int) -> dict[str, Any]:
    """One shedder's figures over ``runs`` streams (see ``summarise``)."""
    return summarise((kind,), setup, runs, seed)[0]


# Fig. 4's x axis: under-provisioning from 90 % to −10 % (10 % over-provisioned).
UNDERPROVISION_SWEEP = (0.9, 0.75, 0.5, 0.25, 0.0, -0.1)
SWEEPS = ("underprovision", "distribution")


def sweep(axis: str, setup: Setup, runs: int, seed: int) -> list[dict[str, Any]]:
    """Fig. 4 (``underprovision``) or Fig. 5 (``distribution``): every shedder's §5.1
    figures at each value of the axis, the other parameters as ``setup``."""
    if axis not in SWEEPS:
        raise ValueError(f"sweep {axis!r}: choose from {SWEEPS}")
    values: tuple[Any, ...] = UNDERPROVISION_SWEEP if axis == "underprovision" else DISTRIBUTIONS
    points = []
    for value in values:
        at = replace(setup, **{axis: value})
        points.append({axis: value, "shedders": summarise(SHEDDERS, at, runs, seed)})
    return points


def plot_sweep(axis: str, points: list[dict[str, Any]], tau_ms: float, path: str) -> None:
    """Fig. 4: Q̄ (log) per under-provisioning; Fig. 5: Q̄ and λ per distribution. Each
    line is the mean over the runs, the band its min-max."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = ["avg_queuing_latency_ms"] + (["shedding_ratio"] if axis == "distribution" else [])
    fig, axes = plt.subplots(1, len(metrics), figsize=(6 * len(metrics), 4), squeeze=False)
    labels = [f"{100 * p[axis]:.0f} %" if axis == "underprovision" else p[axis] for p in points]
    x = np.arange(len(points))
    for ax, metric in zip(axes[0], metrics, strict=True):
        for kind in SHEDDERS:
            rows = [next(d for d in p["shedders"] if d["shedder"] == kind) for p in points]
            mean = np.array([np.nan if r[metric] is None else r[metric] for r in rows])
            lo = np.array(
                [np.nan if r.get(f"{metric}_min") is None else r[f"{metric}_min"] for r in rows]
            )
            hi = np.array(
                [np.nan if r.get(f"{metric}_max") is None else r[f"{metric}_max"] for r in rows]
            )
            ax.plot(x, mean, marker="o", label=kind)
            ax.fill_between(x, lo, hi, alpha=0.15)
        ax.set_xticks(x, labels)
        ax.set_xlabel("under-provisioning" if axis == "underprovision" else "distribution")
        if metric == "avg_queuing_latency_ms":
            ax.set_yscale("log")
            ax.axhline(tau_ms, color="grey", ls="--", lw=0.8)
            ax.set_ylabel("avg queuing latency Q̄ (ms)")
        else:
            ax.set_ylabel("shedding ratio λ")
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def phases(setup: Setup, seed: int, plot: str | None = None) -> dict[str, Any]:
    """Fig. 6: per window of 4,000 tuples, the four shedders' queuing latency and drops."""
    stream = make_phase_stream(setup, seed)
    series: dict[str, Any] = {}
    for kind in SHEDDERS:
        o = run(kind, setup, stream, seed)
        q, d = o.windows(4000)
        series[kind] = {
            **o.summary(),
            "window_queuing_ms": q.tolist(),
            "window_dropped_ratio": d.tolist(),
        }
    if plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4))
        for kind, s in series.items():
            x = np.arange(1, len(s["window_dropped_ratio"]) + 1) * 4000
            ax1.plot(x, s["window_queuing_ms"], marker=".", label=kind)
            ax2.plot(x, s["window_dropped_ratio"], marker=".", label=kind)
        ax1.set_yscale("log")
        ax1.axhline(setup.tau_ms, color="grey", ls="--", lw=0.8)
        ax1.set_ylabel("avg queuing latency (ms)")
        ax2.set_ylabel("dropped ratio")
        for ax in (ax1, ax2):
            ax.set_xlabel("tuples")
            for k, name in enumerate("ABCDEFG"):
                ax.axvline(k * 20000, color="lightgrey", lw=0.6)
                ax.text(k * 20000 + 8000, ax.get_ylim()[1], name, va="top", fontsize=8)
        ax2.legend()
        fig.tight_layout()
        fig.savefig(plot, dpi=110)
        plt.close(fig)
    return series
