"""A chained operator at run time: its members' code called in turn in one replica.

``elastic_sps.model.topology.chained`` decides what chains; here each event entering the
chain goes through the first member, each of its outputs through the next, and so on;
the last member's outputs are the chain's, sent on under the names the chained topology
gives their operators (a member's code names the successors it was written for). Chaining
changes no outcome: the head raising fails the event, as it would unchained; a later
member raising fails only its own input (``MemberFailed``: dead-lettered with its id and
payload, the member named in the reason) while the event's other outputs go on, as they
would between operators apart. A keyed member after a keyed head reads and writes its own
state of the head's key (an input it raises on leaves none of its writes), saved with the
head's; an input whose key is not the head's fails (``KeyChanged``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from elastic_sps.model.topology import Operator, Topology
from elastic_sps.pipeline.key_state import KeyState
from elastic_sps.pipeline.operators import (
    Context,
    Emitted,
    Output,
    Passthrough,
    Runnable,
    normalise,
    numbered,
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


@dataclass(frozen=True)
class MemberFailed:
    """A chained member raised on one of its inputs: that input's fate (the member's
    input id and payload, what the member unchained would have dead-lettered)."""

    operator: str  # the member
    event_id: str
    payload: Any
    error: Exception  # what it raised, noted with the member's and the chain's names


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
    def after_head_names(self) -> tuple[str, ...]:
        """The members after the head: each is judged on its own inputs."""
        return tuple(step.name for step in self.steps[1:])

    @property
    def keyed_members(self) -> bool:
        return any(step.keyed is not None for step in self.steps)

    def process(self, payload: Any, ctx: Context) -> Output:
        """As an operator (``check``'s samples): a member's failure raises."""
        failed: list[MemberFailed] = []
        out = self.run(payload, ctx, ctx.event_id, failed)
        if failed:
            raise failed[0].error
        return [(dst, p) for dst, _, p in out]

    def run(
        self,
        payload: Any,
        ctx: Context,
        event_id: str,
        failed: list[MemberFailed],
        members: MemberStates | None = None,
        passed: dict[str, int] | None = None,
    ) -> list[Emitted]:
        """One event through every member, its outputs numbered from ``event_id`` as
        unchained (``with_ids`` per member: ``chain: false`` changes no id); the head
        raising raises, a later member's failures go to ``failed``; ``members``: the keyed
        members' states of the event's key (the engine's core passes them per event: this
        object is shared by the replica threads of a task); ``passed``: per member, the
        inputs it took without raising, added to."""
        key = ctx.key  # the head's (a keyed head's), for every output it makes
        head = self._plain(self.steps[0], payload, ctx, event_id)
        if len(self.steps) == 1:
            return self._renamed(head)
        if len(head) == 1:  # a map's one output: no list of lists to flatten
            _, i, p = head[0]
            return self.after_head(p, ctx, i, failed, key, members, passed)
        return [
            out
            for _, i, p in head
            for out in self.after_head(p, ctx, i, failed, key, members, passed)
        ]

    def after_head(
        self,
        payload: Any,
        ctx: Context,
        event_id: str,
        failed: list[MemberFailed],
        key: str = "",
        members: MemberStates | None = None,
        passed: dict[str, int] | None = None,
    ) -> list[Emitted]:
        """One output of the head (``event_id``: an event's output, or a fired window)
        through the other members: the chain's outputs under their chained names, each
        member's numbered from its input's id; an input a member raises on goes to
        ``failed`` and no further, one it takes counts in ``passed``. ``key``: the
        head's."""
        ctx.key, ctx.state = "", {}  # a keyed head's key and state are its own
        items: list[Emitted] = [(None, event_id, payload)]
        for step in self.steps[1:]:
            if not items:
                break
            if step.keyed is not None:  # counts what it took as it goes (``_keyed_member``)
                items = self._keyed_member(step, items, ctx, failed, key, members, passed)
                continue
            outs, took = self._unkeyed_member(step, items, ctx, failed)
            if passed is not None and took:
                passed[step.name] = passed.get(step.name, 0) + took
            items = outs
        return self._renamed(items)

    def _unkeyed_member(
        self, step: ChainStep, items: list[Emitted], ctx: Context, failed: list[MemberFailed]
    ) -> tuple[list[Emitted], int]:
        """An unkeyed member on its inputs: their outputs, and how many it took."""
        outs: list[Emitted] = []
        took = 0
        for _, i, p in items:
            try:
                outs.extend(self._plain(step, p, ctx, i, i))
            except Exception as exc:  # the member's code: its input's failure alone
                failed.append(MemberFailed(step.name, i, p, exc))
                continue
            took += 1
        return outs, took

    def _keyed_member(
        self,
        step: ChainStep,
        items: list[Emitted],
        ctx: Context,
        failed: list[MemberFailed],
        key: str,
        members: MemberStates | None,
        passed: dict[str, int] | None,
    ) -> list[Emitted]:
        """A keyed member on its inputs, each one's writes to its state kept only if it
        returns: their outputs; each input taken counted in ``passed`` at once (an undo
        log that cannot be taken raises out of the step, after the inputs before it)."""
        if members is None:
            raise RuntimeError(f"chain {self.name!r}: keyed member {step.name!r} got no state")
        state = members.of(step.name)
        outs: list[Emitted] = []
        for _, i, p in items:
            before = state.snapshot()
            try:
                outs.extend(with_ids(i, self._keyed_call(step, p, ctx, key, state, i), step.name))
            except Exception as exc:  # the member's code: its input's failure alone
                state.restore(before)
                failed.append(MemberFailed(step.name, i, p, exc))
                continue
            if passed is not None:
                passed[step.name] = passed.get(step.name, 0) + 1
        return outs

    def _renamed(self, result: list[Emitted]) -> list[Emitted]:
        if len(result) == 1 and result[0][0] is None:  # a map's one output, to every successor
            return result
        return [(self.renamed.get(d, d) if d is not None else None, i, p) for d, i, p in result]

    def _plain(
        self,
        step: ChainStep,
        payload: Any,
        ctx: Context,
        number_from: str,
        event_id: str | None = None,
    ) -> list[Emitted]:
        """An unkeyed member (or the head) on one input, its outputs checked and numbered
        from ``number_from``; ``event_id``: a member's input's (None: the head's, set by
        the engine)."""
        ctx.operator = step.name
        head_id = ctx.event_id
        if event_id is not None:
            ctx.event_id = event_id
        try:
            return numbered(
                step.runnable.process(payload, ctx), number_from, step.name, step.successors
            )
        except Exception as exc:  # the member's failure: say which member, then re-raise
            exc.add_note(f"(in {step.name!r}, chained in {self.name!r})")
            raise
        finally:
            ctx.operator, ctx.event_id = self.name, head_id

    def _keyed_call(
        self,
        step: ChainStep,
        payload: Any,
        ctx: Context,
        head_key: str,
        state: KeyState,
        event_id: str,
    ) -> Output:
        """A keyed member on one input: its code sees its own name, its input's id (as
        unchained), the head's key and its state of that key."""
        assert step.keyed is not None
        ctx.operator = step.name
        head_id = ctx.event_id
        ctx.event_id = event_id
        try:
            ctx.key = self._member_key(step.keyed, payload, head_key)
            ctx.state = state
            return normalise(step.runnable.process(payload, ctx), step.name, step.successors)
        except Exception as exc:  # the member's failure: say which member, then re-raise
            exc.add_note(f"(in {step.name!r}, chained in {self.name!r})")
            raise
        finally:
            ctx.operator, ctx.event_id = self.name, head_id
            ctx.key, ctx.state = "", {}

    def _member_key(self, member: Operator, payload: Any, head_key: str) -> str:
        """A keyed member's key for ``payload``: the head's, or its input fails."""
        key = event_key(member, payload)  # NoKey: the input's fate, as unchained
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
