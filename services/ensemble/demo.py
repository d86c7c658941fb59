"""``elastic-sps demo``: up + replay of a spike trace + drain + report and plots."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live

from elastic_sps.control.stabilise import Stabilisation
from elastic_sps.io import id_ledger, rescale_timeline
from elastic_sps.io.kafka_io import read_topics
from elastic_sps.io.knowledge_base import Keys, KnowledgeBase
from elastic_sps.io.redis_client import redis_client
from elastic_sps.model import topology as topology_mod
from elastic_sps.model import traces
from elastic_sps.model.operator import Operator
from elastic_sps.services.ensemble import report as report_mod
from elastic_sps.services.ensemble import state_moves
from elastic_sps.services.ensemble.drain import drain
from elastic_sps.services.ensemble.live_view import Feed, render
from elastic_sps.services.ensemble.replay import (
    WARMUP_S,
    events_needed,
    ids_from_field,
    played,
    replay,
    sample_events,
    warmup_ticks,
)
from elastic_sps.services.ensemble.supervisor import measured_topology, up
from elastic_sps.settings import DEFAULT_POLICY, DEFAULT_PREDICTOR, PlanSettings, ServiceSettings

# The default peak's ceiling: a pipeline whose measured costs are microseconds would
# otherwise be replayed at hundreds of thousands of events/s, far past what the engine's
# own per-event work allows (calibrated on the twitter chain's end-to-end saturation,
# bench_dataplane.py; see docs/measurements.md); the built-in topologies' defaults are below.
MAX_DEFAULT_PEAK_EPS = 5000.0


def default_peak(topo: topology_mod.Topology) -> float:
    """80 % of what the whole pool holds: the input rate at which the bottleneck
    operator's full pool (max_replicas / (θ_i × et_i) events/s of input) is 80 % busy;
    at most ``MAX_DEFAULT_PEAK_EPS``."""
    pool = min(op.max_replicas / (topo.static_theta[op.name] * op.et_s) for op in topo.operators)
    return min(0.8 * pool, MAX_DEFAULT_PEAK_EPS)


def planned_stabilisation(env: dict[str, str]) -> Stabilisation:
    """The stabiliser the plan service will run with ``env`` over this process's own
    environment (``elastic_sps.settings.PlanSettings``: the preset, then single rules)."""
    fields = PlanSettings.model_fields
    given: dict[str, Any] = {k[4:].lower(): v for k, v in env.items() if k.startswith("SPS_")}
    return PlanSettings(**{k: v for k, v in given.items() if k in fields}).stabilisation()


@dataclass
class Replayed:
    """What the replay sent: the warm-up's events (accounted for, not measured), the
    measured replay's, the replay's own count per interval (the ground truth λ_G(t) is
    measured against) and the first measured interval."""

    warm: int
    sent: int
    by_interval: dict[int, int]
    from_interval: int


@dataclass
class Collected:
    """What the ensemble left behind, read before it stops."""

    counts: dict[str, float]
    metrics: list[dict]
    stats: list[dict]
    analysis: list[dict]
    actions: list[dict]
    decided: list[dict]
    restarts: dict[str, int]
    stages: Any
    completed: Any
    changes: list[Any]
    outputs: Any
    deadletter: Path
    moves: list[dict]  # keyed operators' resizes (services/ensemble/state_moves.py)
    pauses: dict[str, list[dict]]
    state: dict[str, dict[str, int]]  # per stateful operator: windows fired, repeats, ...


def run(
    topology: str = "twitter_remote",
    trace_name: str = "short-spikes",
    duration: float = 120.0,
    policy: str = DEFAULT_POLICY,
    predictor: str = DEFAULT_PREDICTOR,
    peak_rate: float | None = None,
    tau_ms: float | None = None,
    run_dir: Path | None = None,
    live: bool = True,
    drain_s: float = 60.0,
    extra_env: dict[str, str] | None = None,
    compare_static: bool = True,
    during: Callable[[Any], None] | None = None,
    warmup_s: float | None = None,
    events_file: str | Path | None = None,
    cycle: bool | None = None,
    plots: bool = True,
) -> dict[str, Any]:
    """``during(ensemble)``, if given, runs in a thread beside the replay (the fault
    benchmark injects its fault there). ``warmup_s``: seconds of traffic at a quarter of
    the peak before the measured replay (``replay.warmup_ticks``; default ``WARMUP_S``).
    ``events_file``: JSON lines of payloads, produced as plain records to the source
    topic (default: the topology's sample events or generator); the warm-up and the
    measured replay send one sequence of them. ``cycle``: start the file again when it
    ends (``replay.sample_events``: by default only when ids do not come from a field;
    a file too short for the run is an error before anything starts). ``plots``: draw
    the run's figures (seconds of matplotlib; a caller reading only the report skips
    them)."""
    run_dir = run_dir or Path(f"runs/demo-{time.strftime('%Y%m%d-%H%M%S')}")
    run_dir.mkdir(parents=True, exist_ok=True)
    topology = measured_topology(topology, run_dir, events_file)
    topo = topology_mod.load(topology)
    trace = traces.load(trace_name)
    peak = peak_rate if peak_rate is not None else default_peak(topo)
    ticks = played(trace, trace.duration_s / duration, peak)
    warm_ticks = warmup_ticks(
        WARMUP_S if warmup_s is None else warmup_s, min(peak, default_peak(topo))
    )
    needed = events_needed(warm_ticks, ticks)
    events = sample_events(topo, events_file, cycle=cycle, needed=needed)
    ids_repeat = bool(cycle) and ids_from_field(topo)
    # every event's fate by id, per stage (shared/io/id_ledger.py): the report's `lost`
    env = {"SPS_TRACK_IDS": "true", **(extra_env or {})}
    with up(topology, run_dir, policy, predictor, tau_ms, extra_env=env) as ens:
        console = Console()
        if live:
            for name, url in ens.urls().items():
                console.print(f"{name:9s} {url}")
        warm = replay(
            ens.bootstrap,
            input_topic(topo, ServiceSettings().topics),
            topo,
            warm_ticks,
            events=events,
        )
        # the warm-up's events processed; its windows may fire during the replay
        prefix = ens.env["SPS_KEY_PREFIX"]
        drain(redis_client(ens.redis_url), prefix, topo, ens, 90, lambda: None, quiet_s=2.0)
        replayed = _replay_and_drain(
            ens, topo, ticks, events, during, console if live else None, drain_s, warm
        )
        time.sleep(2)
        got = _collect(ens, topo, run_dir, tracked=env["SPS_TRACK_IDS"] == "true")
    rep, intervals = _report(topo, replayed, got, run_dir, peak, tau_ms)
    rep["ids_repeat"] = ids_repeat  # --cycle over a file whose records carry their ids
    if compare_static:  # what the simulator says the baselines would have done
        rep["simulated"] = _simulated(topology, trace_name, duration, peak, policy, predictor, env)
    measured = report_mod.replay_window(
        [s for s in got.stats if s["interval"] >= replayed.from_interval]
    )
    timeline = [
        {k: s.get(k) for k in ("interval", "input_events", "shed_events", "queuing_ms_mean")}
        for s in measured
    ]
    files = report_mod.plots(topo, got.stats, run_dir, tau_ms) if plots else []
    _write_run_files(run_dir, rep, got, replayed, intervals)
    return {
        "report": rep,
        "plots": [str(f) for f in files],
        "timeline": timeline,
        "stats": got.stats,
        "window": measured,
        "sent_by_interval": replayed.by_interval,
    }


def _replay_and_drain(
    ens: Any,
    topo: topology_mod.Topology,
    ticks: Any,
    events: Iterator[bytes],
    during: Callable[[Any], None] | None,
    console: Console | None,
    drain_s: float,
    warm: int,
) -> Replayed:
    """Replay ``ticks`` in a thread (``during`` beside it), showing the live view on
    ``console`` if given, then drain; stop the replay whatever happened."""
    topics = ServiceSettings().topics
    r = redis_client(ens.redis_url)
    prefix = ens.env["SPS_KEY_PREFIX"]
    td = float(ens.env["SPS_TD"])
    out = Replayed(warm, 0, {}, int(time.time() // td))
    stop = threading.Event()

    def play() -> None:
        out.sent = replay(
            ens.bootstrap,
            input_topic(topo, topics),
            topo,
            ticks,
            stop,
            sent_by_interval=out.by_interval,
            td=td,
            events=events,
        )

    t = threading.Thread(target=play, daemon=True)
    t.start()
    if during is not None:
        threading.Thread(target=during, args=(ens,), name="during", daemon=True).start()
    feed = Feed(ens.bootstrap, topics.stats, topics.analysis) if console is not None else None
    try:
        if feed is None:
            t.join()
            drain(r, prefix, topo, ens, drain_s, lambda: None)
            return out
        with Live(render(topo, feed), console=console, refresh_per_second=2) as view:
            while t.is_alive():
                view.update(render(topo, feed, "replaying", ens.restarts))
                time.sleep(0.5)
            drain(
                r,
                prefix,
                topo,
                ens,
                drain_s,
                lambda: view.update(render(topo, feed, "draining", ens.restarts)),
            )
        return out
    finally:
        stop.set()
        t.join(10)
        if feed is not None:
            feed.close()


def _collect(ens: Any, topo: topology_mod.Topology, run_dir: Path, tracked: bool) -> Collected:
    """The counts, the control topics, the id ledger, the outputs and the dead letters
    (each with its reason, to ``<run_dir>/deadletter.jsonl``)."""
    topics = ServiceSettings().topics
    r = redis_client(ens.redis_url)
    prefix = ens.env["SPS_KEY_PREFIX"]
    ingress = KnowledgeBase(r, prefix).ingress_counts()
    outputs = sorted({op.output for op in topo.operators if op.output})
    control = [topics.stats, topics.deadletter, topics.metrics, topics.analysis, topics.actions]
    read = read_topics(ens.bootstrap, [*control, topics.decisions, *outputs], max_s=60)
    stats = [s for s in read[topics.stats] if "operators" in s]
    deadletter = run_dir / "deadletter.jsonl"
    deadletter.write_text("".join(json.dumps(row) + "\n" for row in read[topics.deadletter]))
    return Collected(
        counts={k: float(v) for k, v in ingress.items()},
        metrics=read[topics.metrics],
        stats=stats,
        analysis=read[topics.analysis],
        actions=read[topics.actions],
        decided=[d for d in read[topics.decisions] if "operator" in d],
        restarts=dict(ens.restarts),
        stages=id_ledger.stage_accounts(r, prefix, topo.order) if tracked else None,
        completed=id_ledger.completed_count(r, prefix, topo.sinks) if tracked else None,
        changes=rescale_timeline.with_recovery(rescale_timeline.read(r, Keys(prefix)), stats),
        outputs=write_outputs({t: read[t] for t in outputs}, run_dir),
        deadletter=deadletter,
        moves=KnowledgeBase(r, prefix).moves(),
        pauses={op.name: KnowledgeBase(r, prefix).pauses(op.name) for op in topo.operators},
        state={
            op.name: state_counts(KnowledgeBase(r, prefix), op)
            for op in topo.operators
            if op.stateful
        },
    )


def state_counts(kb: KnowledgeBase, op: Operator) -> dict[str, int]:
    """A stateful operator's engine counts: windows fired, events it had applied before
    (repeats), keys whose state expired (``state_ttl_s``), late events; and, keyed, the
    keys holding state at the end (``keys``)."""
    counts = kb.counts(op.name)
    out = {k: counts.get(k, 0) for k in ("fired", "repeats", "state_expired", "late")}
    if op.key and op.window is None:
        out["keys"] = kb.keys_with_state(op.name, op.key_groups)
    return out


def _report(
    topo: topology_mod.Topology,
    replayed: Replayed,
    got: Collected,
    run_dir: Path,
    peak: float,
    tau_ms: float | None,
) -> tuple[dict[str, Any], list[dict]]:
    """The run's report, and its per-interval rows (scaled, shed, why)."""
    rep = report_mod.build(
        topo,
        replayed.warm + replayed.sent,
        got.counts,
        got.metrics,
        got.stats,
        got.analysis,
        got.actions,
        got.stages,
        got.completed,
        since_interval=replayed.from_interval,
    )
    rep["input_error_vs_replay"] = report_mod.input_error(got.stats, replayed.by_interval)
    rep["rescale_timeline"] = rescale_timeline.summary(got.changes)
    intervals = report_mod.interval_rows(got.stats, got.decided)
    rep["intervals_shedding"] = sum(1 for row in intervals if row["shed_events"] > 0)
    rep["intervals_short"] = sum(1 for row in intervals if row["short"])
    rep["peak_rate"] = peak
    rep["warmup_sent"] = replayed.warm  # in `sent`, accounted for, not measured
    rep["restarts"] = got.restarts
    rep["run_dir"] = str(run_dir)
    rep["outputs"] = got.outputs
    rep["deadletter"] = str(got.deadletter)
    rep["tau_ms"] = tau_ms
    rep["state"] = got.state
    return rep, intervals


def _simulated(
    topology: str,
    trace_name: str,
    duration: float,
    peak: float,
    policy: str,
    predictor: str,
    env: dict[str, str],
) -> dict[str, Any]:
    """What the simulator says the policy run and the static baselines would have done."""
    from elastic_sps.model.engine import LIVE_ENGINE
    from elastic_sps.services.ensemble.forecast import Scenario, simulated

    sc = Scenario(topology, trace_name, duration, peak)
    spec = policy if ":" in policy or policy != "pa-sps" else f"pa-sps:{predictor}"
    rules = planned_stabilisation(env)  # the plan service's, read as it reads them
    return {
        s: simulated(sc, s, LIVE_ENGINE, stabilisation=rules if s == spec else None)[0]
        for s in (spec, "static:1", "static:8")
    }


def _write_run_files(
    run_dir: Path, rep: dict[str, Any], got: Collected, replayed: Replayed, intervals: list[dict]
) -> None:
    (run_dir / "stats.json").write_text(json.dumps(got.stats))  # the per-interval series
    # the replay's own count per interval: the ground truth λ_G(t) is measured against
    (run_dir / "sent.json").write_text(json.dumps(replayed.by_interval))
    timeline_rows = [
        {
            **asdict(c),
            "decision_to_effect_s": c.decision_to_effect_s,
            "decision_to_recovery_s": c.decision_to_recovery_s,
        }
        for c in got.changes
    ]
    timeline_rows = state_moves.attach(timeline_rows, got.moves, got.pauses)
    rep["state_moves"] = state_moves.summary(timeline_rows)
    report_mod.save(rep, run_dir)
    (run_dir / "rescales.json").write_text(json.dumps(timeline_rows))
    (run_dir / "intervals.json").write_text(json.dumps(intervals))  # scaled, shed, why


def input_topic(topo: topology_mod.Topology, topics: Any) -> str:
    """Where the replay writes: the topology's first source topic, else the ingress's."""
    return topo.source.topic(str(topics.ingress))


def write_outputs(read: dict[str, list[Any]], run_dir: Path) -> dict[str, str]:
    """Each output topic's records to ``<run_dir>/outputs/<topic>.jsonl`` (one ``{"id",
    "value"}`` a line); returns topic -> file."""
    files = {}
    for topic, rows in read.items():
        path = run_dir / "outputs" / f"{topic}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        files[topic] = str(path)
    return files
