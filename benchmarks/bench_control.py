"""Control out of sample: predictor selection against the best predictor in hindsight, and
a PA-SPS configuration against DS2 and AUTOSCALE, in the simulator, on a varied trace set.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_control.py
     [--group selection|dominance|bound|frontier|rescales] [--traces a,b] [--td 1,5]
     [--jobs 2] [--json]

The set: the real traces beside the project (``../shared/traces/``: the PA-SPS twitter,
twitter-raw and dns traces, NAB's AAPL, FB and GOOG tweet volumes, NAB's nyc_taxi; a
missing one is an error naming it, ``--traces bundled`` runs the bundled ones alone) and
the bundled spike traces, each at td 1 s and 5 s, on the ``twitter``
topology with ``compare``'s defaults (one trace row per second, the trace's own rates).
Nothing in the policies was fitted to these traces: the selector's and the headroom's
constants come from their own definitions (``elastic_sps.control.selection``,
``elastic_sps.control.plan``).

``selection``: ``pa-sps:auto`` and the five single predictors; per case the score
(``elastic_sps.simulation.scoring``), the regret of auto against the best single predictor
in hindsight (best − auto, and as a share of |best|) and auto's reconfigurations against the
median single predictor's. Targets: regret ≤ 2 % of |best| and reconfigurations ≤ the median.

``dominance``: the recommended PA-SPS configuration beside DS2 and AUTOSCALE; per case
saved resources, mean latency and reconfigurations. Target: saved ≥ both, latency ≤ both,
reconfigurations < DS2's. Deterministic: the same figures on any machine.

``bound``: what Eq. 2 at a uniform utilisation target can reach at best: PA-SPS handed the
next interval's true input as its forecast (``Foresight``, perfect prediction) at U = 0.50,
0.55, ..., 1.00, with and without the calm stabiliser, beside DS2 and AUTOSCALE. Per case
the configurations that dominate both (saved ≥, latency ≤) and those that also
reconfigure less than DS2. A case no configuration dominates is out of reach for every
predictor with a perfect next-interval forecast at any of those uniform U (a biased
forecast is a U varying in time, which this grid does not try).

``frontier``: each family over its utilisation target U ∈ {0.5, ..., 0.9}: the default
PA-SPS (``pa-sps:basic@U+calm``), ``ds2@U`` and ``autoscale@U``. Per case each family's
frontier (``elastic_sps.simulation.frontier``), whether PA-SPS's covers DS2's (for every DS2
point a PA-SPS point with saved ≥ and latency ≤), each family's latency at ``ds2@0.7``'s
saved resources, and reconfigurations per day of the default against ``ds2``'s.

``rescales``: the default (``+calm``) and the presets with a 60 s and a 5 min scale-down
window (``+steady``, ``+patient``) beside ``ds2@U``; per case each one's rescales a day
as a share of ``ds2@0.7``'s and whether its point is on or below DS2's frontier. Target:
at most half, on or below.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Iterable, Sequence
from multiprocessing import Pool
from pathlib import Path
from typing import Any

from elastic_sps.control.predictors import Predictor
from elastic_sps.control.stabilise import split_spec
from elastic_sps.model import topology, traces
from elastic_sps.policies import Policy, make_policy
from elastic_sps.policies.pa_sps import PASPS
from elastic_sps.services.cli.simulation import MAX_FITS  # as the CLI: ANN/RF refits per run
from elastic_sps.simulation import scoring
from elastic_sps.simulation.frontier import Point, covers, frontier, latency_at, on_or_below
from elastic_sps.simulation.simulator import simulate

REAL = Path(__file__).resolve().parents[2] / "shared" / "traces"
REAL_TRACES = (
    "pasps-twitter",
    "pasps-twitter-raw",
    "pasps-dns",
    "Twitter_volume_AAPL",
    "Twitter_volume_FB",
    "Twitter_volume_GOOG",
    "nyc_taxi",
)
BUNDLED = ("spikes", "short-spikes", "flash-crowd")
SINGLES = ("pa-sps:basic", "pa-sps:lr", "pa-sps:fft", "pa-sps:ann", "pa-sps:rf")
SELECTION = ("pa-sps:auto", *SINGLES)
RECOMMENDED = "pa-sps:basic@0.7+calm"  # the services' defaults (elastic_sps.settings)
DOMINANCE = (RECOMMENDED, "ds2", "autoscale")
FORESIGHT_U = tuple(round(0.5 + 0.05 * i, 2) for i in range(11))
FRONTIER_U = (0.5, 0.6, 0.7, 0.8, 0.9)
FAMILIES = {
    "pa-sps": "pa-sps:basic@{u}+calm",  # the default's family: its predictor and stabiliser
    "ds2": "ds2@{u}",
    "autoscale": "autoscale@{u}",
}
FRONTIER = tuple(f.format(u=u) for f in FAMILIES.values() for u in FRONTIER_U)
# the default (calm) and the presets with longer scale-down windows, beside DS2's family
DEFAULT_POLICY = RECOMMENDED.partition("+")[0]
CANDIDATES = tuple(f"{DEFAULT_POLICY}+{p}" for p in ("calm", "steady", "patient"))
RESCALES = (*CANDIDATES, *(FAMILIES["ds2"].format(u=u) for u in FRONTIER_U))
BOUND = (
    "ds2",
    "autoscale",
    *(f"foresight@{u:.2f}{calm}" for u in FORESIGHT_U for calm in ("", "+calm")),
)


class Foresight(Predictor):
    """Forecasts exactly what the next interval brings (it is handed the whole series): a
    bound for every predictor, not a predictor."""

    name = "foresight"

    def __init__(self, arrivals: Iterable[float]) -> None:
        super().__init__()
        self.series = [float(x) for x in arrivals]
        self.seen = 0

    def observe(self, value: float) -> None:
        super().observe(value)
        self.seen += 1

    def predict(self) -> float:  # after interval k-1 is observed: interval k's true input
        return self.series[min(self.seen, len(self.series) - 1)]

    def _forecast(self, y: object) -> float:  # predict() is overridden: never called
        raise NotImplementedError


def trace_paths(names: Sequence[str] | None) -> list[str]:
    """The traces named (default: the whole set; ``bundled``: the bundled ones); a real
    trace that is not there is an error listing every one missing."""
    if names == ["bundled"]:
        return list(BUNDLED)
    wanted = [n for n in REAL_TRACES if names is None or n in names]
    missing = [str(REAL / f"{n}.csv") for n in wanted if not (REAL / f"{n}.csv").exists()]
    if missing:
        raise SystemExit(
            f"traces missing: {', '.join(missing)} (--traces bundled runs the bundled ones)"
        )
    every = [*(str(REAL / f"{n}.csv") for n in wanted), *BUNDLED]
    return [t for t in every if names is None or Path(t).stem in names or t in names]


def run_one(job: tuple[str, float, str]) -> dict[str, Any]:
    trace, td, spec = job
    topo = topology.load("twitter")
    arrivals = traces.load(trace).per_interval(td)
    name, preset = split_spec(spec)
    if name.startswith("foresight@"):
        u = float(name.partition("@")[2])
        policy: Policy = PASPS(topo, Foresight(arrivals), target_utilisation=u, name=name)
    else:
        fits = {"retrain_every": max(1, math.ceil(len(arrivals) / MAX_FITS))}
        policy = make_policy(name, topo, **fits)
    m = simulate(topo, arrivals, policy, td, stabilisation=preset).metrics
    return {
        "trace": Path(trace).stem,
        "td": td,
        "policy": spec,
        "score": round(scoring.score(m), 4),
        "saved_resources": round(m.saved_resources, 4),
        "processed_ratio": round(m.processed_ratio, 5),
        "latency_ms": round(m.latency_ms, 1),
        "reconfigurations": m.reconfigurations,
        "per_day": round(m.reconfigurations * 86_400 / (len(arrivals) * td), 1),
    }


def selection_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by = {r["policy"]: r for r in rows}
    singles = [by[s] for s in SINGLES if s in by]
    best = max(singles, key=lambda r: r["score"])
    auto = by["pa-sps:auto"]
    regret = best["score"] - auto["score"]
    median_reconf = statistics.median(r["reconfigurations"] for r in singles)
    return {
        "best": best["policy"],
        "best_score": best["score"],
        "auto_score": auto["score"],
        "median_single_score": statistics.median(r["score"] for r in singles),
        "regret": round(regret, 4),
        "regret_share": round(regret / abs(best["score"]), 4) if best["score"] else None,
        "auto_reconfigurations": auto["reconfigurations"],
        "median_reconfigurations": median_reconf,
        "within_2pct": regret <= 0.02 * abs(best["score"]),
        "reconf_ok": auto["reconfigurations"] <= median_reconf,
    }


def dominance_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by = {r["policy"]: r for r in rows}
    mine, others = by[RECOMMENDED], [by["ds2"], by["autoscale"]]
    return {
        "saved_ok": all(mine["saved_resources"] >= o["saved_resources"] for o in others),
        "latency_ok": all(mine["latency_ms"] <= o["latency_ms"] for o in others),
        "reconf_ok": mine["reconfigurations"] < by["ds2"]["reconfigurations"],
    }


def bound_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by = {r["policy"]: r for r in rows}
    ds2, autoscale = by["ds2"], by["autoscale"]
    both = [
        r["policy"]
        for r in rows
        if r["policy"].startswith("foresight")
        and r["saved_resources"] >= max(ds2["saved_resources"], autoscale["saved_resources"])
        and r["latency_ms"] <= min(ds2["latency_ms"], autoscale["latency_ms"])
    ]
    fewer = [p for p in both if by[p]["reconfigurations"] < ds2["reconfigurations"]]
    return {"dominate_both": both, "and_fewer_reconf": fewer}


def frontier_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by = {r["policy"]: r for r in rows}
    fronts = {
        fam: frontier(
            Point(r["saved_resources"], r["latency_ms"], r["policy"])
            for u in FRONTIER_U
            if (r := by.get(spec.format(u=u)))
        )
        for fam, spec in FAMILIES.items()
    }
    ds2_default = by["ds2@0.7"]
    level = ds2_default["saved_resources"]
    at = {fam: latency_at(front, level) for fam, front in fronts.items()}
    default = by[FAMILIES["pa-sps"].format(u=0.7)]
    return {
        "frontiers": {fam: [p.label for p in front] for fam, front in fronts.items()},
        "pasps_covers_ds2": covers(fronts["pa-sps"], fronts["ds2"]),
        "ds2_saved": level,
        "latency_at_ds2_saved": {f: None if v is None else round(v, 2) for f, v in at.items()},
        "default_per_day": default["per_day"],
        "ds2_per_day": ds2_default["per_day"],
    }


def rescales_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per candidate: its rescales a day as a share of ``ds2@0.7``'s, whether that is at
    most half, and whether its point lies on or below DS2's frontier."""
    by = {r["policy"]: r for r in rows}
    ds2 = frontier(
        Point(r["saved_resources"], r["latency_ms"], p)
        for p, r in by.items()
        if p.startswith("ds2@")
    )
    base = by["ds2@0.7"]["per_day"]
    out = {}
    for spec in CANDIDATES:
        r = by[spec]
        share = r["per_day"] / base if base else (0.0 if r["per_day"] == 0 else math.inf)
        point = Point(r["saved_resources"], r["latency_ms"], spec)
        out[spec] = {
            "share_of_ds2": round(share, 3),
            "at_most_half": share <= 0.5,
            "on_or_below_ds2": on_or_below(point, ds2),
        }
    return {"candidates": out}


SUMMARIES = {
    "selection": selection_summary,
    "dominance": dominance_summary,
    "bound": bound_summary,
    "frontier": frontier_summary,
    "rescales": rescales_summary,
}
GROUPS = {
    "selection": SELECTION,
    "dominance": DOMINANCE,
    "bound": BOUND,
    "frontier": FRONTIER,
    "rescales": RESCALES,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--group", choices=tuple(GROUPS), default="selection")
    ap.add_argument("--traces", help="comma-separated trace names (default: the whole set)")
    ap.add_argument("--td", default="1,5", help="comma-separated interval lengths (s)")
    ap.add_argument("--policies", help="override the group's policies")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    specs = args.policies.split(",") if args.policies else list(GROUPS[args.group])
    names = args.traces.split(",") if args.traces else None
    cases = [(t, float(td)) for t in trace_paths(names) for td in args.td.split(",")]
    jobs = [(t, td, s) for t, td in cases for s in specs]
    with Pool(args.jobs) as pool:
        rows = pool.map(run_one, jobs, chunksize=1)
    summarise = SUMMARIES[args.group]
    out = []
    for t, td in cases:
        case = [r for r in rows if r["trace"] == Path(t).stem and r["td"] == td]
        summary = summarise(case) if not args.policies else {}
        out.append({"trace": Path(t).stem, "td": td, "rows": case, **summary})
    if args.json:
        print(json.dumps(out, indent=1))
        return
    for c in out:
        print(f"{c['trace']} td={c['td']:g}")
        for r in c["rows"]:
            print(
                f"  {r['policy']:<22} score {r['score']:8.4f}  saved {r['saved_resources']:.3f}"
                f"  processed {r['processed_ratio']:.4f}  latency {r['latency_ms']:8.1f} ms"
                f"  reconf {r['reconfigurations']}"
            )
        summary = {k: v for k, v in c.items() if k not in ("trace", "td", "rows")}
        print("  " + ", ".join(f"{k}={v}" for k, v in summary.items()))
    if args.group == "rescales" and not args.policies:
        print_rescale_counts(out)


def print_rescale_counts(cases: list[dict[str, Any]]) -> None:
    """How many cases each candidate meets the target on (at most half, on or below)."""
    for spec in CANDIDATES:
        got = [c["candidates"][spec] for c in cases]
        half = sum(g["at_most_half"] for g in got)
        on = sum(g["on_or_below_ds2"] for g in got)
        both = sum(g["at_most_half"] and g["on_or_below_ds2"] for g in got)
        print(f"{spec}: at most half {half}, on or below {on}, both {both} of {len(got)}")


if __name__ == "__main__":
    main()
