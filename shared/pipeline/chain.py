"""A chained operator at run time: its members' code called in turn in one replica.

``elastic_sps.model.topology.chained`` decides what chains; here each event entering the
chain goes through the first member, each of its outputs through the next, and so on;
the last member's outputs are the chain's, sent on under the names the chained topology
gives their operators (a member's code names the successors it was written for). A
member that raises fails the event as a whole (dead-lettered once, with the member named
in the reason), as an operator would. A keyed member after a keyed head reads and writes
its own state of the head's key, saved with the head's when the whole chain returns; an
output whose key is not the head's fails its event (``KeyChanged``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from elastic_sps.model.topology import Operator, Topology
from elastic_sps.pipeline.operators import (
    Context,
    Emitted,
    Output,
    Passthrough,
    Runnable,
    normalise,
    open_operator,
    with_ids,
)
from elastic_sps.pipeline.stateful import (
    AggregateOperator,
    Count,
    MemberStates,
    event_key,
    open_aggregate,
)


class KeyChanged(ValueError):
    """A keyed member's event whose key is not its chain head's: it belongs to another
    partition, whose state this replica does not hold."""


@dataclass
class ChainStep:
    name: str
    runnable: Runnable
    successors: tuple[str, ...]  # the member's own: the next member, or the chain's
    keyed: Operator | None = None  # a keyed member after the head (``same_key``)


@dataclass
class ChainedOperator:
    name: str
    steps: tuple[ChainStep, ...]
    renamed: dict[str, str]  # a declared successor's name -> its chained operator's

    def open(self, ctx: Context) -> None:
        pass  # ``open_runnable`` opened each member under its own name

    @property
    def head(self) -> Runnable:
        """The first member's code (a window's aggregate, when a window heads the chain)."""
        return self.steps[0].runnable

    @property
    def keyed_members(self) -> bool:
        return any(step.keyed is not None for step in self.steps)

    def process(self, payload: Any, ctx: Context) -> Output:
        return [(dst, p) for dst, _, p in self.run(payload, ctx, ctx.event_id)]

    def run(
        self, payload: Any, ctx: Context, event_id: str, members: MemberStates | None = None
    ) -> list[Emitted]:
        """One event through every member, its outputs numbered from ``event_id`` as
        unchained (``with_ids`` per member: ``chain: false`` changes no id); ``members``:
        the keyed members' states of the event's key (the engine's core passes them per
        event: this object is shared by the replica threads of a task)."""
        key = ctx.key  # the head's (a keyed head's), for every output it makes
        head = with_ids(event_id, self._call(self.steps[0], payload, ctx), self.steps[0].name)
        if len(self.steps) == 1:
            return self._renamed(head)
        return [out for _, i, p in head for out in self.after_head(p, ctx, i, key, members)]

    def after_head(
        self,
        payload: Any,
        ctx: Context,
        event_id: str,
        key: str = "",
        members: MemberStates | None = None,
    ) -> list[Emitted]:
        """One output of the head (``event_id``: an event's output, or a fired window)
        through the other members: the chain's outputs under their chained names, each
        member's numbered from its input's id. ``key``: the head's."""
        ctx.key, ctx.state = "", {}  # a keyed head's key and state are its own
        items: list[Emitted] = [(None, event_id, payload)]
        for step in self.steps[1:]:
            items = [
                out
                for _, i, p in items
                for out in with_ids(i, self._call(step, p, ctx, key, members, i), step.name)
            ]
        return self._renamed(items)

    def _renamed(self, result: list[Emitted]) -> list[Emitted]:
        return [(self.renamed.get(d, d) if d is not None else None, i, p) for d, i, p in result]

    def _call(
        self,
        step: ChainStep,
        payload: Any,
        ctx: Context,
        head_key: str = "",
        members: MemberStates | None = None,
        event_id: str | None = None,
    ) -> Output:
        """``event_id``: a member's input's (what its code sees as ``ctx.event_id``, as
        unchained); None: the head's, set by the engine."""
        if step.keyed is not None and members is None:
            raise RuntimeError(f"chain {self.name!r}: keyed member {step.name!r} got no state")
        ctx.operator = step.name  # what the member's code sees is its own name
        head_id = ctx.event_id
        if event_id is not None:
            ctx.event_id = event_id
        try:
            if step.keyed is not None:
                assert members is not None
                ctx.key = self._member_key(step.keyed, payload, head_key)
                ctx.state = members.of(step.name)
            return normalise(step.runnable.process(payload, ctx), step.name, step.successors)
        except Exception as exc:  # the member's failure: say which member, then re-raise
            exc.add_note(f"(in {step.name!r}, chained in {self.name!r})")
            raise
        finally:
            ctx.operator, ctx.event_id = self.name, head_id
            if step.keyed is not None:
                ctx.key, ctx.state = "", {}

    def _member_key(self, member: Operator, payload: Any, head_key: str) -> str:
        """A keyed member's key for ``payload``: the head's, or the event fails."""
        key = event_key(member, payload)  # NoKey: the event's fate, as unchained
        if key != head_key:
            raise KeyChanged(
                f"keyed operator {member.name!r} got key {key!r} in a chain whose head "
                f"{self.steps[0].name!r} has key {head_key!r}: a chained member reads only "
                f"its head's key; set `chain: false` on {member.name!r} to route by key"
            )
        return key

    def close(self) -> None:
        for step in self.steps:
            step.runnable.close()


def open_runnable(topo: Topology, name: str, ctx: Context) -> Runnable:
    """Operator ``name``'s code, opened: the user's, a ``Passthrough`` for an operator
    with none (its declared fractions); in a chained topology a ``ChainedOperator`` over
    its members (a lone operator whose successor was chained is a chain of one, so its
    outputs carry the chained name; any other runs as declared, with nothing around it)."""
    op = topo[name]
    declared = topo.unchained
    if declared is not None:
        renamed = {(o.members[0].name if o.members else o.name): o.name for o in topo.operators}
        if not op.members and all(renamed[e.dst] == e.dst for e in declared.successors[name]):
            return open_runnable(declared, name, ctx)  # nothing to chain or rename
        members = op.members or (declared[name],)
        steps = tuple(
            ChainStep(
                m.name,
                open_runnable(declared, m.name, Context(m.name, ctx.redis, ctx.prefix, ctx.writes)),
                tuple(e.dst for e in declared.successors[m.name]),
                m if k > 0 and m.key else None,
            )
            for k, m in enumerate(members)
        )
        return ChainedOperator(name, steps, renamed)
    if op.window is not None:
        return AggregateOperator(open_aggregate(op.code, name) if op.code else Count())
    if not op.code:
        return Passthrough(name, tuple((e.dst, e.fraction) for e in topo.successors[name]))
    return open_operator(op.code, name, ctx)
