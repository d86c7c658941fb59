"""A user's operator, named in the topology by ``code: "package.module:callable"``.

The callable is either

* a function ``(payload, ctx) -> outputs``, or
* a class with ``open(ctx)`` (load a model, open a client: once per worker process),
  ``process(payload, ctx) -> outputs`` and ``close()``.

``outputs`` is a list of ``(successor or None, payload)``: ``None`` sends the payload to
every successor, a successor's name to that one only (a sink's go to its ``output``
topic; a sink without ``output`` drops them, ``check`` warns); ``None`` or ``[]`` emits
nothing (a filter). Payloads are plain JSON data. The module is imported the usual way (installed,
or on ``PYTHONPATH``); the dataplane ships its top-level package to a cluster's executors.
"""

from __future__ import annotations

import importlib
import inspect
import zlib
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol, cast

Output = list[tuple[str | None, Any]]
Emitted = tuple[str | None, str, Any]  # (successor, None: every one; output id; payload)
OperatorFn = Callable[[Any, Any], Any]


class OperatorLoadError(RuntimeError):
    """An operator's code cannot be imported or opened: the message names both."""


class Context:
    """What an operator's ``open`` and ``process`` get as ``ctx``.

    * ``operator``: the operator's name in the topology.
    * ``event_id``: the current event's id (the source's ``id``, or topic/partition/offset;
      a window result's ``<key>@<start>``).
    * ``redis``: a Redis client for reads (the run's knowledge base); None where there is
      no server (``check``, ``run_local`` without ``redis=``, measuring costs).
    * ``writes``: a Redis pipeline for writes, sent every few hundred writes or 0.1 s and
      at the end of the replica's micro-batch (a round trip per write would cost more than
      the operator); without a server, writes are accepted and dropped.
    * ``prefix``: the run's Redis key prefix, to start your own keys with (then ``:app:``).
    * ``key``, ``state``: a keyed operator's event key and that key's mapping of JSON
      values, kept across events, resizes and restarts and changed exactly once per event
      (``elastic_sps.pipeline.stateful``); "" and a plain dict for an unkeyed one.
    """

    def __init__(
        self, operator: str, redis: Any = None, prefix: str = "sps", writes: Any = None
    ) -> None:
        self.operator: str = operator
        self.redis: Any = redis
        self.prefix: str = prefix
        self.event_id: str = ""
        self.writes: Any = writes if writes is not None else redis
        self.key: str = ""
        self.state: MutableMapping[str, Any] = {}


class DiscardedWrites:
    """``ctx.writes`` without a Redis (measuring costs, ``check``, ``run_local``): every
    write is accepted and dropped (a pipeline only queues the command)."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: self

    def __len__(self) -> int:
        return 0


class Runnable(Protocol):
    def open(self, ctx: Context) -> None: ...

    def process(self, payload: Any, ctx: Context) -> Output: ...

    def close(self) -> None: ...


@dataclass
class FunctionOperator:
    """A plain function as an operator (nothing to open or close)."""

    fn: OperatorFn

    def open(self, ctx: Context) -> None:
        pass

    def process(self, payload: Any, ctx: Context) -> Any:
        return self.fn(payload, ctx)

    def close(self) -> None:
        pass


@dataclass
class Passthrough:
    """An operator with no code (research topologies): each edge gets its declared
    fraction of the input, deterministically per event id."""

    name: str
    fractions: tuple[tuple[str, float], ...]

    def open(self, ctx: Context) -> None:
        pass

    def process(self, payload: Any, ctx: Context) -> Output:
        out: Output = []
        h = zlib.crc32(f"{ctx.event_id}:{self.name}".encode()) / 2**32
        for dst, fraction in self.fractions:
            whole, frac = int(fraction), fraction - int(fraction)
            out.extend((dst, payload) for _ in range(whole + (1 if h < frac else 0)))
        return out

    def close(self) -> None:
        pass


def resolve(code: str, operator: str) -> Any:
    """The object ``code`` ("package.module:attribute") names, or one clear error."""
    module_name, sep, attr = code.partition(":")
    if not sep or not module_name or not attr:
        raise OperatorLoadError(
            f"operator {operator!r}: code {code!r} must be 'package.module:callable'"
        )
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any import-time error of the user's module
        raise OperatorLoadError(
            f"operator {operator!r}: cannot import module {module_name!r} "
            f"({type(exc).__name__}: {exc})"
        ) from exc
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise OperatorLoadError(
                f"operator {operator!r}: module {module_name!r} has no {attr!r}"
            )
        obj = getattr(obj, part)
    return obj


def instantiate(code: str, operator: str) -> Runnable:
    """A fresh operator instance from ``code``: a class is constructed with no
    arguments, a function wrapped."""
    obj = resolve(code, operator)
    if inspect.isclass(obj):
        missing = [m for m in ("process",) if not callable(getattr(obj, m, None))]
        if missing:
            raise OperatorLoadError(
                f"operator {operator!r}: class {code!r} has no process(payload, ctx) method"
            )
        try:
            inst = obj()
        except Exception as exc:
            raise OperatorLoadError(
                f"operator {operator!r}: {code}() failed ({type(exc).__name__}: {exc})"
            ) from exc
        for m in ("open", "close"):
            if not callable(getattr(inst, m, None)):
                setattr(inst, m, _noop)
        return cast(Runnable, inst)
    if callable(obj):
        return FunctionOperator(obj)
    raise OperatorLoadError(f"operator {operator!r}: {code!r} is neither a function nor a class")


def _noop(*_: Any) -> None:
    pass


def open_operator(code: str, operator: str, ctx: Context) -> Runnable:
    """Instantiate and ``open``; an ``open`` that raises is a load error naming both."""
    inst = instantiate(code, operator)
    try:
        inst.open(ctx)
    except Exception as exc:
        raise OperatorLoadError(
            f"operator {operator!r}: open() of {code!r} failed ({type(exc).__name__}: {exc})"
        ) from exc
    return inst


class NotASuccessor(TypeError):
    """An operator routed an output to a name that is not one of its successors (the
    event is lost to the pipeline: ``check`` calls it an error)."""


def normalise(result: Any, operator: str, successors: tuple[str, ...]) -> Output:
    """The operator's return value as ``[(successor or None, payload)]``. A malformed
    return is the operator's bug: a ``TypeError`` naming it (counted as its failure)."""
    if result is None:
        return []
    if not isinstance(result, list | tuple):
        raise TypeError(
            f"operator {operator!r} returned {type(result).__name__}; it must return a list "
            "of (successor or None, payload)"
        )
    out: Output = []
    for item in result:
        if not (isinstance(item, tuple) and len(item) == 2):
            raise TypeError(
                f"operator {operator!r} returned {item!r}; each output is "
                "(successor or None, payload)"
            )
        if item[0] is not None and item[0] not in successors:
            raise NotASuccessor(
                f"operator {operator!r} sent to {item[0]!r}, not one of its successors "
                f"{list(successors)}"
            )
        out.append(item)
    return out


def with_ids(event_id: str, result: Output, operator: str) -> list[Emitted]:
    """``operator``'s outputs of one event with their ids: the first keeps the event's
    (a map or a filter changes no id), the k-th is ``<id>/<operator>.<k>``. Naming the
    operator keeps ids unique down a path of fan-outs: with ``<id>/k`` alone, the second
    output of one (``x/1``) and the first of what the next made of it (``x/1`` again)
    would be one id, and a stateful stage after them would drop one as a repeat. A
    chain numbers each member's outputs this way from its input's id, so chaining
    changes no id."""
    return [
        (dst, event_id if k == 0 else f"{event_id}/{operator}.{k}", payload)
        for k, (dst, payload) in enumerate(result)
    ]


def numbered(
    result: Any, event_id: str, operator: str, successors: tuple[str, ...]
) -> list[Emitted]:
    """``normalise`` then ``with_ids``, as the per-event path calls them: a map's one
    output to every successor, the common case, checked and numbered without building the
    intermediate list."""
    if type(result) is list and len(result) == 1:
        item = result[0]
        if type(item) is tuple and len(item) == 2 and item[0] is None:
            return [(None, event_id, item[1])]
    return with_ids(event_id, normalise(result, operator, successors), operator)
