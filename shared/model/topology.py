"""The stream application as a DAG of operators (PA-SPS §2, §3.2 Table 1).

An edge ``p -> i`` carries θ_i^p, the events sent to ``i`` per event ``p`` processes
(Eq. 6). ``source`` is the input stream; it is not an operator.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from elastic_sps.model.operator import (
    CPU_BOUND_SHARE,
    OPERATOR_KEYS,
    Operator,
    flag,
    operator_dict,
    operator_from_doc,
)
from elastic_sps.model.records import SourceSpec
from elastic_sps.model.topology_checks import ON_ERROR, SOURCE, TopologyError, toposort, validate
from elastic_sps.model.topology_doc import check_shape

__all__ = ["CPU_BOUND_SHARE", "ON_ERROR", "SOURCE", "Operator", "TopologyError"]


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    fraction: float = 1.0


@dataclass(frozen=True)
class Topology:
    name: str
    operators: tuple[Operator, ...]
    edges: tuple[Edge, ...]
    description: str = ""
    source: SourceSpec = field(default_factory=SourceSpec)
    origin: str = field(default="", compare=False)  # its file: relative paths start there
    # the document's ``chain`` (``from_dict``: true unless it says false): fuse linear runs
    chain: bool = False
    unchained: Topology | None = field(default=None, compare=False)  # as declared, if chained
    _index: dict[str, Operator] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {op.name: op for op in self.operators})
        validate(self)

    def __getitem__(self, name: str) -> Operator:
        return self._index[name]

    @property
    def measured(self) -> bool:
        """Every operator has its et_ms."""
        return all(op.et_ms is not None for op in self.operators)

    @property
    def declared(self) -> Topology:
        """The operators as the user declared them (each chain's members apart)."""
        return self.unchained or self

    def with_costs(self, costs: Mapping[str, tuple[float, float | None]]) -> Topology:
        """The topology with ``costs`` (declared operator -> (et_ms, cpu_share)) filled in
        where the topology left them out; declared figures stay. A chained topology takes
        its members' costs (what ``elastic_sps.pipeline.costs`` measures) and sums them."""
        if self.unchained is not None:
            return chained(self.unchained.with_costs(costs))
        ops = tuple(
            replace(
                op,
                et_ms=op.et_ms if op.et_ms is not None else costs[op.name][0],
                cpu_share=op.cpu_share if op.cpu_share is not None else costs[op.name][1],
            )
            if op.name in costs
            else op
            for op in self.operators
        )
        return replace(self, operators=ops)

    def relative(self, path: str) -> Path:
        """A path the topology names, relative to its file's folder."""
        p = Path(path)
        if p.is_absolute() or not self.origin or self.origin.startswith("builtin:"):
            return p
        return Path(self.origin).parent / p

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(op.name for op in self.operators)

    @cached_property
    def order(self) -> tuple[str, ...]:
        """Operators in topological order (sources first), stable w.r.t. declaration order."""
        return toposort(self)

    @cached_property
    def predecessors(self) -> dict[str, tuple[Edge, ...]]:
        preds: dict[str, list[Edge]] = {n: [] for n in self.names}
        for e in self.edges:
            preds[e.dst].append(e)
        return {n: tuple(v) for n, v in preds.items()}

    @cached_property
    def successors(self) -> dict[str, tuple[Edge, ...]]:
        succ: dict[str, list[Edge]] = {n: [] for n in (SOURCE, *self.names)}
        for e in self.edges:
            succ[e.src].append(e)
        return {n: tuple(v) for n, v in succ.items()}

    @cached_property
    def entry_operators(self) -> tuple[str, ...]:
        return tuple(e.dst for e in self.successors[SOURCE])

    @cached_property
    def sinks(self) -> tuple[str, ...]:
        return tuple(n for n in self.order if not self.successors[n])

    @cached_property
    def static_theta(self) -> dict[str, float]:
        """θ_i from the declared fractions (Eq. 5 with θ_i^p fixed): events per input event."""
        theta: dict[str, float] = {}
        for name in self.order:
            theta[name] = sum(
                e.fraction * (1.0 if e.src == SOURCE else theta[e.src])
                for e in self.predecessors[name]
            )
        return theta

    def path_seconds(self, per_operator_s: float = 0.0) -> float:
        """The longest source-to-sink path's time without queues: each operator's et plus
        ``per_operator_s`` (an engine's per-hop time, ``EngineModel.hop_s``)."""
        longest: dict[str, float] = {}
        for name in self.order:
            before = max((longest.get(e.src, 0.0) for e in self.predecessors[name]), default=0.0)
            longest[name] = before + self[name].et_s + per_operator_s
        return max(longest.values(), default=0.0)

    def core_replicas(self, cores: float) -> dict[str, float]:
        """The replicas each CPU-bound operator can run at once on ``cores``: the cores
        split among the CPU-bound operators by their CPU work per input event
        (θ_i × et_i × share_i, processor sharing), over the share of a core one replica
        uses. Waiting operators are not listed (their replicas are threads)."""
        work = {
            op.name: self.static_theta[op.name] * op.et_s * (op.cpu_share or 0.0)
            for op in self.operators
            if op.cpu_bound
        }
        total = sum(work.values())
        return {
            n: cores * w / total / (self[n].cpu_share or 1.0) if total > 0 else float(cores)
            for n, w in work.items()
        }

    @property
    def pool_total(self) -> int:
        return sum(op.max_replicas for op in self.operators)

    def capacity_eps(self) -> float:
        """Largest input rate (events/s) the full pool sustains, bottleneck operator first."""
        return min(
            op.max_replicas / op.et_s / self.static_theta[op.name]
            for op in self.operators
            if self.static_theta[op.name] > 0
        )

    def to_dict(self) -> dict[str, Any]:
        if self.unchained is not None:  # the declared document, chained when loaded
            return {**self.unchained.to_dict(), "chain": True}
        return {
            "name": self.name,
            "description": self.description,
            "chain": self.chain,
            "operators": [operator_dict(o) for o in self.operators],
            "edges": [{"from": e.src, "to": e.dst, "fraction": e.fraction} for e in self.edges],
            **({"source": self.source.to_dict()} if self.source.to_dict() else {}),
        }


def from_dict(doc: Mapping[str, Any], origin: str = "<dict>") -> Topology:
    """Build a topology from its YAML/JSON document; errors name ``origin`` and the item."""
    check_shape(doc, origin)
    name = str(doc.get("name") or Path(origin).stem)
    ops_doc = doc.get("operators")
    if not isinstance(ops_doc, list) or not ops_doc:
        raise TopologyError(f"{origin}: 'operators' must be a non-empty list")
    operators = []
    for k, od in enumerate(ops_doc):
        if not isinstance(od, Mapping) or "name" not in od:
            raise TopologyError(f"{origin}: operators[{k}] needs a 'name'")
        where = f"{origin}: operator {od['name']!r}"
        unknown = set(od) - OPERATOR_KEYS
        if unknown:
            raise TopologyError(f"{where}: unknown keys {sorted(unknown)}")
        try:
            operators.append(operator_from_doc(od, where))
        except (TypeError, ValueError) as exc:
            raise TopologyError(f"{where}: {exc}") from exc
    edges = []
    for k, ed in enumerate(doc.get("edges") or []):
        if not isinstance(ed, Mapping) or "from" not in ed or "to" not in ed:
            raise TopologyError(f"{origin}: edges[{k}] needs 'from' and 'to'")
        try:
            fraction = float(ed.get("fraction", 1.0))
        except (TypeError, ValueError) as exc:
            raise TopologyError(
                f"{origin}: edge {ed['from']} -> {ed['to']}: fraction {ed.get('fraction')!r}"
                " is not a number"
            ) from exc
        edges.append(Edge(str(ed["from"]), str(ed["to"]), fraction))
    try:
        source = SourceSpec.from_dict(doc.get("source"))
    except (TypeError, ValueError) as exc:
        raise TopologyError(f"{origin}: {exc}") from exc
    chain = flag(doc.get("chain", True), f"{origin}: chain")
    topo = Topology(
        name, tuple(operators), tuple(edges), str(doc.get("description", "")), source, origin,
        chain,
    )  # fmt: skip
    return chained(topo) if chain else topo


def builtin_names() -> list[str]:
    pkg = resources.files("elastic_sps") / "topologies"
    return sorted(p.name[:-5] for p in pkg.iterdir() if p.name.endswith(".yaml"))


def load(name_or_path: str | Path) -> Topology:
    """Load a built-in topology by name, or a YAML file by path."""
    path = Path(name_or_path)
    # a built-in name wins over a file of that name without a YAML suffix (a stray
    # `log` file in the working directory must not shadow the `log` topology)
    builtin = str(name_or_path) in builtin_names()
    if path.suffix in {".yaml", ".yml", ".json"} or (path.exists() and not builtin):
        if not path.exists():
            raise TopologyError(f"topology file {path} does not exist")
        text = path.read_text()
        origin = str(path)
    else:
        res = resources.files("elastic_sps") / "topologies" / f"{name_or_path}.yaml"
        if not res.is_file():
            raise TopologyError(
                f"unknown topology {str(name_or_path)!r}; built in: {', '.join(builtin_names())}"
            )
        text = res.read_text()
        origin = f"builtin:{name_or_path}"
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise TopologyError(f"{origin}:{yaml_error(exc)}") from None
    return from_dict(doc, origin)


def yaml_error(exc: yaml.YAMLError) -> str:
    """A parser's error as one line: ``LINE:COLUMN: not valid YAML: PROBLEM``."""
    mark = getattr(exc, "problem_mark", None)
    where = f"{mark.line + 1}:{mark.column + 1}:" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"{where} not valid YAML: {problem}"


def linear(name: str, ops: Iterable[Operator]) -> Topology:
    """A chain source -> op1 -> op2 -> ... with fraction 1 (handy for tests and benchmarks)."""
    ops = tuple(ops)
    prev = SOURCE
    edges = []
    for op in ops:
        edges.append(Edge(prev, op.name, 1.0))
        prev = op.name
    return Topology(name, ops, tuple(edges))


def chained(topo: Topology) -> Topology:
    """``topo`` with each maximal linear run of operators fused into one operator, as
    Flink chains operators: the run's events pass from one member to the next in the
    replica's process, not over a Kafka topic, so a chain of n costs one hop, not n.

    An edge p -> i joins a chain when it is p's only way out and i's only way in, i is
    stateless or keyed as the chain's head is (``same_key``: a keyed i needs its events
    routed by key), and p and i would scale alike: the same min/max replicas and
    ``on_error``, neither has ``chain: false``. A keyed or window operator so heads a
    chain of its successors, keeping its key, window and state (a fired window goes
    through the members after it as an event would).
    The chained operator is named ``first..last``; it is one pool to every policy, and
    its et (per event entering it) is each member's et times the events that member
    receives per chain input (the fractions along the run)."""
    base = topo.declared
    runs: list[list[Operator]] = []
    joined: set[str] = set()
    for name in base.order:
        if name in joined:
            continue
        run = [base[name]]
        while (nxt := _chains_to(base, run)) is not None:
            run.append(nxt)
        joined.update(op.name for op in run)
        runs.append(run)
    if all(len(run) == 1 for run in runs):
        return base
    share = {op.name: s for run in runs for op, s in zip(run, _shares(base, run), strict=True)}
    fused = [_fuse(run, [share[op.name] for op in run]) for run in runs]
    rename = {op.name: f.name for run, f in zip(runs, fused, strict=True) for op in run}
    edges = tuple(  # an edge leaving a chain carries the fractions along it
        Edge(rename.get(e.src, e.src), rename[e.dst], e.fraction * share.get(e.src, 1.0))
        for e in base.edges
        if e.src == SOURCE or rename[e.src] != rename[e.dst]
    )
    clash = {f.name for f in fused if f.members} & set(base.names)
    if clash:
        raise TopologyError(
            f"topology {base.name!r}: a chain's name {sorted(clash)} is a declared operator's"
        )
    return replace(base, operators=tuple(fused), edges=edges, unchained=base)


def _chains_to(base: Topology, run: list[Operator]) -> Operator | None:
    """The operator the chain ``run`` extends to, if any (``chained`` says when)."""
    op = run[-1]
    out = base.successors[op.name]
    if len(out) != 1:
        return None
    nxt = base[out[0].dst]
    alike = (op.min_replicas, op.max_replicas, op.on_error) == (
        nxt.min_replicas,
        nxt.max_replicas,
        nxt.on_error,
    )
    # an operator writing its own output topic stays whole (a chain has one output)
    joins = op.chain and nxt.chain and alike and not op.output
    if len(base.predecessors[nxt.name]) != 1 or not joins:
        return None
    return nxt if not nxt.stateful or same_key(run[0], nxt) else None


def same_key(head: Operator, member: Operator) -> bool:
    """Whether keyed ``member`` may join a chain ``head`` heads: keyed alike (the same
    key, key groups, no window, no ``state_ttl_s``), so its events' partition is the
    head's as long as their key is; the chain checks that per event
    (``elastic_sps.pipeline.chain``)."""
    alike = (member.key, member.key_groups) == (head.key, head.key_groups)
    plain = head.window is None and member.window is None
    return bool(head.key) and alike and plain and head.state_ttl_s is member.state_ttl_s is None


def _shares(base: Topology, run: list[Operator]) -> list[float]:
    """The events each member of ``run`` receives per event entering the run."""
    share = [1.0]
    for op in run[:-1]:
        share.append(share[-1] * base.successors[op.name][0].fraction)
    return share


def _fuse(run: list[Operator], share: list[float]) -> Operator:
    if len(run) == 1:
        return run[0]
    et_ms = cpu_share = None
    if all(op.et_ms is not None for op in run):
        work = [s * (op.et_ms or 0.0) for s, op in zip(share, run, strict=True)]
        et_ms = max(sum(work), 1e-3)
        if all(op.cpu_share is not None for op in run):
            cpu_share = sum(w * (op.cpu_share or 0.0) for w, op in zip(work, run, strict=True))
            cpu_share = round(cpu_share / sum(work), 3) if sum(work) > 0 else 0.0
    first, last = run[0], run[-1]
    return Operator(
        name=f"{first.name}..{last.name}",
        et_ms=et_ms,
        min_replicas=first.min_replicas,
        max_replicas=first.max_replicas,
        output=last.output,
        on_error=first.on_error,
        cpu_share=cpu_share,
        members=tuple(run),
        key=first.key,  # the head's: a keyed member's is the same (``same_key``)
        window=first.window,
        key_groups=first.key_groups,
        state_ttl_s=first.state_ttl_s,
    )
