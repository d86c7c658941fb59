"""``elastic-sps compare --live``: every policy run on the live ensemble, one after the
other on the same trace, topology and peak, with the simulator's forecast of the very same
run beside it and the gap between the two.

The figures on both sides are PA-SPS §4.1.3's, computed the same way from per-interval
series: saved resources 1 − mean active / pool, throughput degradation the mean of
|received − processed| / received over busy intervals, processed ratio, mean and p99
end-to-end latency, and rescales (operator-intervals whose replica count changed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from elastic_sps.control.bandit import RewardBounds, reward
from elastic_sps.control.stabilise import Stabilisation, plan_env, split_spec
from elastic_sps.model import topology as topology_mod
from elastic_sps.model.engine import LIVE_ENGINE, EngineModel, Limits
from elastic_sps.services.ensemble.forecast import Scenario, simulated
from elastic_sps.simulation.run_metrics import edge_degradation, per_hour

FIGURES = (
    "saved_resources",
    "throughput_degradation",
    "processed_ratio",
    "latency_ms",
    "latency_ms_p99",
    "rescales",
    "reward",
)


def live_figures(
    topo: Any, report: dict[str, Any], stats: list[dict], sent_by_interval: dict[int, int]
) -> tuple[dict[str, Any], list[int]]:
    """The live run's figures over the replay's own intervals (what the simulator
    forecasts: the warm-up before it and the drain after it are left out of resources,
    degradation and rescales); latency and the processed ratio are over every event."""
    first, last = min(sent_by_interval), max(sent_by_interval)
    window = sorted(
        (s for s in stats if first <= s["interval"] <= last), key=lambda s: s["interval"]
    )
    names = topo.names
    per_op = np.array([[s["operators"][n]["active_replicas"] for s in window] for n in names])
    rescales = int((np.diff(per_op, axis=1) != 0).sum()) if per_op.size else 0
    total = per_op.sum(axis=0) if per_op.size else np.zeros(0)
    per_input = sum(topo.static_theta[n] for n in topo.sinks)
    figures = {
        "saved_resources": float(1 - total.mean() / topo.pool_total) if total.size else None,
        "throughput_degradation": edge_degradation(
            [s["input_events"] for s in window],
            [sum(s["operators"][n]["processed"] for n in topo.sinks) / per_input for s in window],
        ),
        "processed_ratio": report.get("processed_ratio"),
        "latency_ms": report.get("latency_ms_mean"),
        "latency_ms_p99": report.get("latency_ms_p99"),
        "rescales": rescales,
        "rescales_per_hour": per_hour(
            rescales, len(window), float(window[0].get("td", 1.0)) if window else 1.0
        ),
        "expired": report.get("expired"),
    }
    return figures, [int(x) for x in total]


def run_reward(figures: dict[str, Any], goal_s: float | None = None) -> float | None:
    """The bandit's reward (``elastic_sps.control.bandit.reward``, the authors' weights and bounds)
    over a whole run, latency normalised against the goal (5 s without one): what
    issue 15 compares ``pa-sps:auto`` with each single predictor by."""
    lat, degr, saved = (
        figures.get(k) for k in ("latency_ms", "throughput_degradation", "saved_resources")
    )
    if lat is None or degr is None or saved is None:
        return None
    bounds = RewardBounds.for_goal(1000.0 * goal_s if goal_s else None)
    return reward(lat, degr, saved, bounds=bounds)


def gap(live: dict[str, Any], sim: dict[str, Any], live_r: list[int], sim_r: list[int]) -> dict:
    out: dict[str, Any] = {}
    for k in ("saved_resources", "throughput_degradation", "processed_ratio", "rescales", "reward"):
        a, b = live.get(k), sim.get(k)
        out[k] = None if a is None or b is None else a - b
    a, b = live.get("latency_ms"), sim.get("latency_ms")
    out["latency_ratio"] = a / b if a and b else None
    out["replicas_correlation"] = _correlation(live_r, sim_r)
    # How far the live series trails the forecast: the shift (whole intervals) that
    # correlates best, which is what EngineModel.plan_delay calibrates.
    shifted = {k: _correlation(live_r[k:], sim_r) for k in range(0, 8)}
    best = max(
        (k for k in shifted if shifted[k] is not None),
        key=lambda k: shifted[k] or 0.0,
        default=None,
    )
    out["replicas_best_lag"] = best
    out["replicas_correlation_at_best_lag"] = shifted[best] if best is not None else None
    return out


def _correlation(a: list[int], b: list[int]) -> float | None:
    n = min(len(a), len(b))
    ok = n > 2 and np.std(a[:n]) > 0 and np.std(b[:n]) > 0
    return float(np.corrcoef(a[:n], b[:n])[0, 1]) if ok else None


def run(
    sc: Scenario,
    policies: list[str],
    out_dir: Path,
    engine: EngineModel = LIVE_ENGINE,
    extra_env: dict[str, str] | None = None,
    drain_s: float = 120.0,
    warmup_s: float | None = None,
    t_out_s: float | None = None,
    stabilisation: Stabilisation | None = None,
    latency_goal_s: float | None = None,
    events_file: str | Path | None = None,
) -> list[dict[str, Any]]:
    from elastic_sps.services.ensemble import demo

    rows = []
    for spec in policies:
        name, preset = split_spec(spec)  # pa-sps:lr+calm: the calm stabiliser, both sides
        rules = preset or stabilisation
        # the live plan runs the rules the forecast runs: none unless the spec names some
        calm_env = plan_env(rules or Stabilisation(), sc.td)
        run_dir = out_dir / spec.replace(":", "-").replace("+", "-")
        out = demo.run(
            topology=sc.topology,
            trace_name=sc.trace,
            duration=sc.duration,
            policy=name,
            peak_rate=sc.peak_rate,
            run_dir=run_dir,
            live=False,
            drain_s=drain_s,
            warmup_s=warmup_s,
            extra_env={"SPS_COST_MODE": "wait", **(extra_env or {}), **calm_env},
            compare_static=False,
            events_file=events_file,
        )
        topo = topology_mod.load(sc.topology)
        live, live_r = live_figures(topo, out["report"], out["stats"], out["sent_by_interval"])
        limits = Limits(t_out_s=t_out_s)
        sim, sim_r = simulated(sc, name, engine, limits, drain_s, rules, latency_goal_s)
        for figures in (live, sim):
            figures["reward"] = run_reward(figures, latency_goal_s)
        rows.append(
            {
                "policy": spec,
                "live": live,
                "simulated": sim,
                "gap": gap(live, sim, live_r, sim_r),
                "series": {"live_replicas": live_r, "simulated_replicas": sim_r},
                "live_latency_series": [s.get("latency_ms_mean") for s in out["window"]],
                "run_dir": str(run_dir),
            }
        )
    return rows


def plot(rows: list[dict[str, Any]], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(rows), 1, figsize=(10, 2.6 * len(rows)), squeeze=False)
    for ax, row in zip(axes[:, 0], rows, strict=True):
        ax.step(
            range(len(row["series"]["live_replicas"])),
            row["series"]["live_replicas"],
            where="post",
            label="live replicas",
        )
        ax.step(
            range(len(row["series"]["simulated_replicas"])),
            row["series"]["simulated_replicas"],
            where="post",
            linestyle="--",
            label="simulated replicas",
        )
        ax.set_title(row["policy"], fontsize=9)
        ax.set_ylabel("replicas")
        ax2 = ax.twinx()
        ax2.plot(
            [x if x is not None else np.nan for x in row["live_latency_series"]],
            color="tab:red",
            alpha=0.6,
            label="live latency (ms)",
        )
        ax2.set_ylabel("latency ms")
        ax.legend(fontsize=7, loc="upper left")
    axes[-1, 0].set_xlabel("interval (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def print_table(rows: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title="compare --live: live | simulated (gap)")
    t.add_column("policy")
    for k in FIGURES:
        t.add_column(k.replace("_", " "), justify="right")
    t.add_column("replica corr.", justify="right")
    t.add_column("best lag (corr.)", justify="right")

    def cell(v: Any) -> str:
        return "-" if v is None else f"{v:.3g}" if isinstance(v, float) else str(v)

    for r in rows:
        t.add_row(
            r["policy"],
            *[f"{cell(r['live'][k])} | {cell(r['simulated'][k])}" for k in FIGURES],
            cell(r["gap"]["replicas_correlation"]),
            "{} ({})".format(
                cell(r["gap"]["replicas_best_lag"]),
                cell(r["gap"]["replicas_correlation_at_best_lag"]),
            ),
        )
    Console().print(t)
