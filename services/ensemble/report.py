"""The run report: counts (nothing vanished), scaling actions, the PA-SPS metrics, plots."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np

from elastic_sps.io.id_ledger import StageAccount
from elastic_sps.model.topology import Topology
from elastic_sps.simulation.run_metrics import edge_degradation, per_hour


def replay_window(stats: list[dict]) -> list[dict]:
    """The intervals from the first input to the last processing: the idle start-up and
    the quiet tail after the drain would flatter saved resources."""
    stats = sorted(stats, key=lambda s: s["interval"])
    busy = [
        k
        for k, s in enumerate(stats)
        if s["input_events"] > 0 or any(o["processed"] > 0 for o in s["operators"].values())
    ]
    return stats[busy[0] : busy[-1] + 1] if busy else stats


SHORT_RULES = ("pool", "budget")  # a need scaling cannot meet: shedding is allowed


def interval_rows(stats: list[dict], decisions: list[dict]) -> list[dict]:
    """Per interval of the replay: the input, what was shed, the active replicas, which
    operators' counts changed and which plans' needs the pool or budget could not meet
    (and why) — what was scaled and what was shed, and why. Decisions are matched by
    the interval of the statistics they were made from."""
    why: dict[int, dict[str, list[str]]] = {}
    for d in decisions:
        rules = [r for r in d.get("limited_by", []) if r in SHORT_RULES]
        if rules:
            why.setdefault(d["interval"], {})[d["operator"]] = rules
    rows: list[dict] = []
    before: dict[str, int] = {}
    for s in replay_window(stats):
        active = {n: o["active_replicas"] for n, o in s["operators"].items()}
        changed = {n: [before[n], a] for n, a in active.items() if n in before and before[n] != a}
        rows.append(
            {
                "interval": s["interval"],
                "input_events": s["input_events"],
                "shed_events": s.get("shed_events", 0.0),
                "replicas": sum(active.values()),
                "scaled": changed,
                "short": why.get(s["interval"], {}),
            }
        )
        before = active
    return rows


def _exact_mean(metrics: list[dict], what: str) -> float | None:
    """Sum over count where records carry them; else the mean of the samples."""
    total = n = 0.0
    for m in metrics:
        if m.get(f"{what}_n"):
            total += m[f"{what}_ms_sum"]
            n += m[f"{what}_n"]
        else:
            total += sum(m.get(f"{what}_ms", []))
            n += len(m.get(f"{what}_ms", []))
    return total / n if n else None


def build(
    topo: Topology,
    sent: int,
    ingress_counts: dict[str, float],
    metrics: list[dict],
    stats: list[dict],
    analysis: list[dict],
    actions: list[dict],
    stages: list[StageAccount] | None = None,
    completed_ids: int | None = None,
    since_interval: int | None = None,
) -> dict[str, Any]:
    """``stages``: the id ledger per operator; with it ``lost`` counts ids, per stage, and
    ``completed_ids`` (distinct ids per sink, summed) is what completed, however often an
    event was replayed. ``since_interval``: where the measured replay began (after the
    warm-up): latency, resources, rescales and degradation are taken from there on, the
    accounting of events over the whole run."""
    since = since_interval if since_interval is not None else -1
    window = replay_window([s for s in stats if s["interval"] >= since])
    at_sinks = _at_sinks(topo, metrics, completed_ids)
    return {
        **_accounting(topo, sent, ingress_counts, metrics, stages, at_sinks),
        **_rescales(topo, window, actions),
        **_latencies([m for m in metrics if m.get("interval", since) >= since]),
        **_resources(topo, window, analysis, ingress_counts, at_sinks),
    }


def _at_sinks(topo: Topology, metrics: list[dict], completed_ids: int | None) -> float:
    """What reached the sinks, in sink events (distinct ids per sink when the ledger ran:
    a replayed duplicate completes once); by the counters, a sink chain's processed events
    less its events one of whose members failed (``id_ledger.completed_count``)."""
    if completed_ids is not None:
        return float(completed_ids)
    sinks = set(topo.sinks)
    return sum(
        m.get("processed", 0) - m.get("incomplete", 0)
        for m in metrics
        if m.get("operator") in sinks
    )


def _per_operator(metrics: list[dict]) -> dict[str, dict[str, float]]:
    """processed, dead_lettered, expired and members_dead_lettered summed per operator over
    the metric records."""
    fields = ("processed", "dead_lettered", "expired", "members_dead_lettered")
    out: dict[str, dict[str, float]] = {f: {} for f in fields}
    for m in metrics:
        op = str(m.get("operator"))  # a record with none still counts in the totals
        for field, sums in out.items():
            sums[op] = sums.get(op, 0) + m.get(field, 0)
    return out


def _accounting(
    topo: Topology,
    sent: int,
    ingress_counts: dict[str, float],
    metrics: list[dict],
    stages: list[StageAccount] | None,
    at_sinks: float,
) -> dict[str, Any]:
    """Every event's fate: admitted, shed, processed, dead-lettered, expired, completed
    (``at_sinks``: ``_at_sinks``), lost (by id, per stage, when the ledger ran)."""
    entry = set(topo.entry_operators)
    by_op = _per_operator(metrics)
    processed = sum(by_op["processed"].get(o, 0) for o in entry)
    dead_entry = sum(by_op["dead_lettered"].get(o, 0) for o in entry)
    expired_entry = sum(by_op["expired"].get(o, 0) for o in entry)
    dead_ops = sum(v for o, v in by_op["dead_lettered"].items() if o != "source")
    dead_ops += sum(by_op["members_dead_lettered"].values())  # not the entry's events' fates
    expired_ops = sum(v for o, v in by_op["expired"].items() if o != "source")
    per_input = sum(topo.static_theta[n] for n in topo.sinks)
    admitted = int(ingress_counts.get("admitted", 0))
    ingress_dead = int(ingress_counts.get("dead_lettered", 0))
    return {
        "sent": sent,
        # read from the source by whatever admits (the ingress or the entry step)
        "received": int(ingress_counts.get("received", 0)),
        "admitted": admitted,
        "shed": int(ingress_counts.get("shed", 0)),
        "processed": int(processed),
        "dead_lettered": int(ingress_dead + dead_ops),
        "expired": int(expired_ops),
        # reached a window operator after its windows closed (by id; dead-lettered too)
        "late": sum(s.late for s in stages) if stages is not None else None,
        # completed: what reached the sinks, in input events (the DAG's declared fractions)
        "completed": float(at_sinks / per_input) if per_input else None,
        # by id when the ledger ran: Σ over operators of ids sent there and never resolved
        "lost": sum(s.lost for s in stages)
        if stages is not None
        else int(admitted - processed - dead_entry - expired_entry),
        "lost_counted_by": "event id, per stage" if stages is not None else "entry counters",
        "stages": [s.as_dict() for s in stages] if stages is not None else None,
        # processings beyond one per id (at-least-once replays), Σ over operators
        "duplicates": sum(
            max(0, by_op["processed"].get(s.operator, 0) - s.processed) for s in stages
        )
        if stages is not None
        else None,
        "unkeyed": int(ingress_counts.get("unkeyed", 0)),
    }


def _rescales(topo: Topology, window: list[dict], actions: list[dict]) -> dict[str, Any]:
    """Scale-outs and scale-ins applied, and operator-intervals whose count changed per
    hour of the replay (flapping)."""
    applied = [a for a in actions if a.get("status") == "applied"]

    def moved(a: dict, up: bool) -> bool:
        return any(
            (v > a["previous"].get(k, v)) if up else (v < a["previous"].get(k, v))
            for k, v in a["targets"].items()
        )

    changes = sum(
        s["operators"][n]["active_replicas"] != p["operators"][n]["active_replicas"]
        for p, s in itertools.pairwise(window)
        for n in topo.names
    )
    td = float(window[0].get("td", 1.0)) if window else 1.0
    return {
        "scale_out_actions": sum(1 for a in applied if moved(a, up=True)),
        "scale_in_actions": sum(1 for a in applied if moved(a, up=False)),
        "rescales_per_hour": per_hour(changes, len(window), td),
    }


def _latencies(timed: list[dict]) -> dict[str, Any]:
    """End-to-end and entry queuing latency of the measured replay, per event."""
    lat = np.array([x for m in timed for x in m.get("latency_ms", [])])
    queuing = np.array([x for m in timed for x in m.get("queuing_ms", [])])
    return {
        "latency_ms_mean": _exact_mean(timed, "latency"),
        "latency_ms_p50": float(np.percentile(lat, 50)) if len(lat) else None,
        "latency_ms_p99": float(np.percentile(lat, 99)) if len(lat) else None,
        "queuing_ms_mean": _exact_mean(timed, "queuing"),
        "queuing_ms_p99": float(np.percentile(queuing, 99)) if len(queuing) else None,
    }


def _resources(
    topo: Topology,
    window: list[dict],
    analysis: list[dict],
    ingress_counts: dict[str, float],
    at_sinks: float,
) -> dict[str, Any]:
    """Replicas used against the pool, throughput degradation, the processed ratio
    (``at_sinks``: ``_at_sinks``) and the input forecast's error over the measured replay."""
    admitted = int(ingress_counts.get("admitted", 0))
    shed = int(ingress_counts.get("shed", 0))
    sinks = set(topo.sinks)
    per_input = sum(topo.static_theta[n] for n in sinks)
    active_total = [sum(o["active_replicas"] for o in s["operators"].values()) for s in window]
    by_interval = {a["interval"]: a for a in analysis}
    pred = [by_interval.get(s["interval"] - 1, {}).get("predicted_input") for s in window]
    pairs = [
        (s["input_events"], p)
        for s, p in zip(window, pred, strict=True)
        if p is not None and s["input_events"] > 0
    ]
    return {
        "shed_ratio": shed / (admitted + shed) if admitted + shed else 0.0,
        "saved_resources": 1 - float(np.mean(active_total)) / topo.pool_total
        if active_total
        else None,
        "replicas_mean": float(np.mean(active_total)) if active_total else None,
        "replicas_max": int(max(active_total)) if active_total else None,
        "throughput_degradation": edge_degradation(
            [s["input_events"] for s in window],
            [sum(s["operators"][n]["processed"] for n in sinks) / per_input for s in window]
            if per_input
            else [],
        ),
        # PA-SPS §4.1.3: completed / received; expired, shed, dead-lettered do not count
        "processed_ratio": at_sinks / per_input / admitted if admitted and per_input else None,
        "error_input": float(np.mean([abs(a - p) / a for a, p in pairs])) if pairs else None,
        "intervals": len(window),
    }


def input_error(stats: list[dict], sent_by_interval: dict[int, int]) -> float | None:
    """Mean per-interval relative error of the monitor's λ_G(t) against the events the
    replay sent in that interval (the ground truth)."""
    seen = {s["interval"]: s["input_events"] for s in stats}
    errors = [abs(seen.get(k, 0.0) - n) / n for k, n in sent_by_interval.items() if n > 0]
    return float(np.mean(errors)) if errors else None


_PLOTS = ("input_vs_throughput", "replicas", "shed_ratio", "latency")


def plots(
    topo: Topology, stats: list[dict], run_dir: Path, tau_ms: float | None = None
) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stats = replay_window(stats)
    if not stats:
        return []
    t = np.array([s["interval"] - stats[0]["interval"] for s in stats]) * stats[0]["td"]
    td = stats[0]["td"]
    entry = topo.entry_operators
    figures = {name: plt.subplots(figsize=(10, 4)) for name in _PLOTS}

    ax = figures["input_vs_throughput"][1]
    ax.plot(t, [s["input_events"] / td for s in stats], label="input (events/s)")
    ax.plot(
        t,
        [sum(s["operators"][e]["processed"] for e in entry) / td for s in stats],
        label="throughput (entry operators)",
    )
    ax = figures["replicas"][1]
    for n in topo.names:
        ax.step(t, [s["operators"][n]["active_replicas"] for s in stats], where="post", label=n)
    ax.set_ylabel("active replicas")
    ax = figures["shed_ratio"][1]
    ratio = [s.get("shed_events", 0) / s["input_events"] if s["input_events"] else 0 for s in stats]
    ax.plot(t, ratio, label="shed ratio")
    ax.set_ylabel("shed ratio")
    ax = figures["latency"][1]
    ax.plot(t, [s.get("latency_ms_mean") or np.nan for s in stats], label="mean")
    ax.plot(t, [s.get("latency_ms_p99") or np.nan for s in stats], label="p99")
    ax.plot(t, [s.get("queuing_ms_mean") or np.nan for s in stats], label="queuing mean")
    if tau_ms is not None:
        ax.axhline(tau_ms, color="grey", linestyle="--", label="τ")
    ax.set_ylabel("latency (ms)")
    figures["input_vs_throughput"][1].set_ylabel("events/s")
    titles = {
        "input_vs_throughput": "input and the entry operators' throughput",
        "replicas": "active replicas per operator",
        "shed_ratio": "share of the input shed at ingress (LAS)",
        "latency": "end-to-end latency of the events completed in each interval",
    }

    files = []
    for name, (fig, ax) in figures.items():
        ax.set_xlabel("seconds into the replay")
        ax.set_title(titles.get(name, name))
        ax.legend(fontsize=7)
        fig.tight_layout()
        files.append(run_dir / f"{name}.png")
        fig.savefig(files[-1], dpi=100)
        plt.close(fig)
    return files


def _n(v: Any, digits: int = 0) -> str:
    if v is None:
        return "–"
    return f"{v:,.{digits}f}" if isinstance(v, int | float) else str(v)


def summary_lines(r: dict[str, Any]) -> list[tuple[str, str]]:
    """The report's figures grouped as a person reads them: (group, one line)."""
    tl = r.get("rescale_timeline") or {}
    effect = tl.get("decision_to_effect_s") or {}
    actions = (r.get("scale_out_actions") or 0) + (r.get("scale_in_actions") or 0)
    return [
        (
            "events",
            f"sent {_n(r.get('sent'))} · shed {_n(r.get('shed'))} · completed "
            f"{_n(r.get('completed'))} · expired {_n(r.get('expired'))} · dead-lettered "
            f"{_n(r.get('dead_lettered'))} · late {_n(r.get('late'))} · lost {_n(r.get('lost'))} "
            f"({r.get('lost_counted_by') or 'by count'}) · duplicates {_n(r.get('duplicates'))}"
            + (" (ids repeat: the events file was cycled)" if r.get("ids_repeat") else ""),
        ),
        (
            "latency",
            f"mean {_n(r.get('latency_ms_mean'))} ms · p50 {_n(r.get('latency_ms_p50'))} ms · "
            f"p99 {_n(r.get('latency_ms_p99'))} ms · queuing mean "
            f"{_n(r.get('queuing_ms_mean'))} ms (per event)",
        ),
        (
            "resources",
            f"saved {_n(r.get('saved_resources'), 3)} · replicas mean "
            f"{_n(r.get('replicas_mean'), 1)}, max {_n(r.get('replicas_max'))} · processed "
            f"{_n(r.get('processed_ratio'), 3)} of the admitted",
        ),
        (
            "rescales",
            f"{actions} actions ({_n(r.get('scale_out_actions'))} out, "
            f"{_n(r.get('scale_in_actions'))} in; {_n(r.get('rescales_per_hour'))} an hour) · "
            f"decision → effect median {_n(effect.get('median'), 2)} s, "
            f"p99 {_n(effect.get('p99'), 2)} s",
        ),
        (
            "input",
            f"peak {_n(r.get('peak_rate'))} events/s · forecast error of λ_G "
            f"{_n(r.get('error_input'), 3)} · intervals {_n(r.get('intervals'))}, "
            f"{_n(r.get('intervals_short'))} short of pool, "
            f"{_n(r.get('intervals_shedding'))} shedding · restarts {r.get('restarts') or 'none'}",
        ),
    ]


FORECAST_ROWS = (
    ("saved resources", "saved_resources", 3),
    ("mean latency ms", "latency_ms", 0),
    ("p99 latency ms", "latency_ms_p99", 0),
    ("processed ratio", "processed_ratio", 3),
    ("rescales", "rescales", 0),
)
LIVE_KEYS = {"latency_ms": "latency_ms_mean", "rescales": "_actions"}


def print_report(report: dict[str, Any], files: list[Path]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    head = Table(title=f"elastic-sps demo report · {report.get('run_dir', '')}", show_header=False)
    head.add_column("group", style="bold")
    head.add_column("figures")
    for group, line in summary_lines(report):
        head.add_row(group, line)
    console.print(head)
    simulated = report.get("simulated") or {}
    if simulated:
        actions = report.get("scale_out_actions", 0) + report.get("scale_in_actions", 0)
        live = {**report, "_actions": actions}
        ft = Table(title="live beside the simulator's forecast (same trace and arrivals)")
        ft.add_column("figure")
        ft.add_column("live", justify="right")
        for spec in simulated:
            ft.add_column(f"forecast {spec}", justify="right")
        for label, key, digits in FORECAST_ROWS:
            cells = [_n(simulated[s].get(key), digits) for s in simulated]
            ft.add_row(label, _n(live.get(LIVE_KEYS.get(key, key)), digits), *cells)
        console.print(ft)
        console.print(
            "  live p99 is over events; the forecast's p99 is over intervals, weighted by "
            "events (a fluid model has one latency per interval)"
        )
    if report.get("stages"):
        st = Table(title="every event by id, per operator")
        cols = ("operator", "sent", "processed", "expired", "dead", "lost", "members_dead")
        for col in cols:  # members_dead: a chain's members' own inputs, beside its events
            st.add_column(col.replace("_", " "), justify="left" if col == "operator" else "right")
        for s in report["stages"]:
            st.add_row(*(_n(s.get(c, 0)) for c in cols))
        console.print(st)
    for f in files:
        print(f"plot: {f}")


def save(report: dict[str, Any], run_dir: Path) -> None:
    (run_dir / "report.json").write_text(json.dumps(report, indent=2))
