"""``elastic-sps check``: what can be known about a topology without servers.

The document against its model (``elastic_sps.model.topology_doc``) and rules, every
operator's code imported and opened, and the sample events run through in this process
(``local_run``) with each operator's real exception when it raises. An error is what
stops a pipeline from running as meant; a warning is what a user may have meant.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elastic_sps.model import topology as topology_model
from elastic_sps.model.records import lookup_first, paths
from elastic_sps.model.topology import Topology, TopologyError
from elastic_sps.pipeline.chain import open_runnable
from elastic_sps.pipeline.failures import MAX_FAILURE_SHARE, OperatorFailing, user_frames
from elastic_sps.pipeline.local_run import DeadLetter, LocalRun, connect_redis, run_local
from elastic_sps.pipeline.operators import (
    Context,
    DiscardedWrites,
    NotASuccessor,
    OperatorLoadError,
)
from elastic_sps.pipeline.samples import sample_payloads
from elastic_sps.pipeline.stateful import Count, WindowAggregator, open_aggregate

# past this share of its sample events raising, an operator has a bug, not bad input:
# the share past which the dataplane's FailureGuard stops one
MOST = MAX_FAILURE_SHARE
MAX_EVENTS = 1000
NO_REDIS = re.compile(r"'NoneType' object has no attribute")


@dataclass(frozen=True)
class Finding:
    level: str  # "error" or "warning"
    message: str  # one line, the cause included
    frames: str = ""  # the user's code's last frames, when it raised

    def line(self) -> str:
        return f"{self.level}: {self.message}"


@dataclass
class CheckReport:
    findings: list[Finding]
    operators: int = 0
    events: int = 0
    run: LocalRun | None = None

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "error"]


def check(
    topology: str | Path,
    events_file: str | Path | None = None,
    redis: Any = None,
    max_events: int = MAX_EVENTS,
) -> CheckReport:
    """Every finding on ``topology`` (a built-in name or a YAML file), its operators and
    its sample events (``events_file``, else the topology's own). ``redis``: a URL or
    client for operators that use ``ctx.redis``."""
    try:
        topo = topology_model.load(topology)
    except TopologyError as exc:
        return CheckReport([Finding("error", str(exc))])
    client = connect_redis(redis)
    report = CheckReport(sink_warnings(topo), operators=len(topo.declared.operators))
    report.findings += [Finding("warning", w) for w in topo.source.warnings()]
    try:
        samples = sample_payloads(topo, events_file)
    except (FileNotFoundError, ValueError, OperatorLoadError) as exc:
        report.findings.append(Finding("error", str(exc)))
        return report
    if samples is None:
        report.findings += open_errors(topo, client)
        note = "no sample events (source.sample_events or --events FILE): code not run"
        report.findings.append(Finding("warning", note))
        return report
    samples = samples[:max_events]
    try:
        report.run = run_local(topo, samples, redis=client)
    except OperatorLoadError:  # one operator's: name every one's (opening each once more)
        report.findings += open_errors(topo, client)
        return report
    except OperatorFailing as exc:
        report.findings.append(Finding("error", str(exc), _frames(exc.__cause__)))
        return report
    report.events = len(samples)
    report.findings += raised_findings(report.run, client is not None)
    report.findings += key_findings(topo, samples)
    report.findings += rekeyed_findings(report.run)
    return report


def rekeyed_findings(run: LocalRun) -> list[Finding]:
    """A keyed operator chained after a keyed head that gets sample events under another
    key than the head's: live, each would be dead-lettered (``KeyChanged``)."""
    by_member: dict[str, list[tuple[str, str, str, str]]] = defaultdict(list)
    for found in run.rekeyed:
        by_member[found[0]].append(found)
    return [
        Finding(
            "error",
            f"operator {name!r} is chained after a keyed operator on the same key, but "
            f"{len(seen)} sample event(s) reach it under another key (first: {seen[0][1]!r} "
            f"with key {seen[0][3]!r}, its chain's head had {seen[0][2]!r}): chained, each "
            f"would be dead-lettered; set `chain: false` on {name!r}",
        )
        for name, seen in by_member.items()
    ]


def key_findings(topo: Topology, samples: list[Any]) -> list[Finding]:
    """A source key no sample event has (a typo leaves every event unkeyed for LAS)."""
    src = topo.source
    if not src.key or src.format != "json":
        return []
    path = paths(src.key if src.key.startswith("field:") else f"field:{src.key}")
    if any(isinstance(p, dict) and lookup_first(p, path) is not None for p in samples):
        return []
    return [Finding("warning", f"source.key {src.key!r} is in none of the sample events")]


def sink_warnings(topo: Topology) -> list[Finding]:
    """A sink with code and no ``output:``: what it returns goes nowhere."""
    base = topo.declared
    return [
        Finding(
            "warning",
            f"operator {op.name!r} is a sink without output: what it returns "
            "is dropped (name a topic with output:)",
        )
        for op in base.operators
        if op.code and not op.window and not base.successors[op.name] and not op.output
    ]


def open_errors(topo: Topology, redis: Any = None) -> list[Finding]:
    """Each operator whose code does not import, construct or ``open`` (one that needs
    ``ctx.redis`` while there is none: a warning)."""
    out = []
    base = topo.declared
    for name in base.order:
        op = base[name]
        try:
            if op.window is not None:  # the runtime's rules too (a session needs merge)
                WindowAggregator(op, open_aggregate(op.code, name) if op.code else Count())
            else:
                ctx = Context(name, redis, "check", DiscardedWrites())
                open_runnable(base, name, ctx).close()
        except OperatorLoadError as exc:
            level = "warning" if redis is None and NO_REDIS.search(str(exc)) else "error"
            out.append(Finding(level, _no_redis_hint(str(exc), level), _frames(exc.__cause__)))
    return out


def raised_findings(run: LocalRun, with_redis: bool) -> list[Finding]:
    """Per operator that raised: an error when it raised on most of its events."""
    by_op: dict[str, list[DeadLetter]] = defaultdict(list)
    for letter in run.dead_letters:
        by_op[letter.operator].append(letter)
    out = []
    for name, letters in by_op.items():
        got = run.events if name == "source" else run.received.get(name, len(letters))
        first = letters[0]
        text = f"operator {name!r} raised on {len(letters)} of {got} sample events; the first "
        text += f"({first.event_id}): {first.reason}"
        if name == "source":
            text = f"{len(letters)} of {got} sample events are not records the source reads: "
            text += first.reason
        level = "error" if len(letters) > MOST * got else "warning"
        if not with_redis and NO_REDIS.search(first.reason):
            level = "warning"
        out.append(Finding(level, _no_redis_hint(text, level), first.frames))
        out += _bad_routes(name, letters)
    return out


def _bad_routes(name: str, letters: list[DeadLetter]) -> list[Finding]:
    """A route to a name that is not a successor loses every such event: an error,
    however few of the samples took it."""
    routes = [d for d in letters if d.reason.startswith(NotASuccessor.__name__ + ":")]
    if not routes:
        return []
    text = f"operator {name!r} routes {len(routes)} sample events nowhere: {routes[0].reason}"
    return [Finding("error", text, routes[0].frames)]


def _no_redis_hint(text: str, level: str) -> str:
    if level == "warning" and NO_REDIS.search(text):
        return text + " (ctx.redis is None without servers: pass --redis URL)"
    return text


def _frames(exc: BaseException | None) -> str:
    return "" if exc is None else user_frames(exc)
