"""``ctx.state``: one key's state as a keyed operator's code sees it, and the undo log
that lets a chained member's failed input leave no write behind."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from elastic_sps.io.state_store import MISSING


class KeyStore(Protocol):
    """What a key's state needs of a partition's store (``stateful.Store``)."""

    def get(self, kind: str, group: int, field: str) -> Any: ...
    def put(self, kind: str, group: int, field: str, value: Any) -> None: ...
    def delete(self, kind: str, group: int, field: str) -> None: ...


_ABSENT = object()  # a field the input found missing
_SCALARS = (str, int, float, bool, type(None))  # values no reference can change in place


def _copy(value: Any) -> Any:
    return value if isinstance(value, _SCALARS) else orjson.loads(orjson.dumps(value))


@dataclass
class Undo:
    """One input's undo log: each field it touched as it was before, the fields' order,
    and ``changed``."""

    changed: bool
    order: tuple[str, ...]
    old: dict[str, Any] = dataclasses.field(default_factory=dict)


class KeyState(MutableMapping[str, Any]):
    """``ctx.state``: one key's state, a mapping of JSON-serialisable values. Changes
    reach the store only when the operator returns (``save``): an event whose operator
    raises leaves no write behind."""

    def __init__(self, store: KeyStore, group: int, key: str, kind: str = "s") -> None:
        """``kind``: ``s``, or a keyed chain member's ``s:<member>`` (``MemberStates``)."""
        self._store, self.group, self._key, self._kind = store, group, key, kind
        found = store.get(kind, group, key)
        # a copy: the operator may change nested values in place before it raises
        self._data: dict[str, Any] = (
            orjson.loads(orjson.dumps(found)) if found is not MISSING else {}
        )
        self._changed = False
        self._undo: Undo | None = None
        # fields whose value (a list, a map...) the operator has held: it may change them
        # in place later, through that reference, without this mapping seeing it
        self._lent: set[str] = set()

    def snapshot(self) -> Undo:
        """Begins an input's undo log, what ``restore`` puts back: a chained member's
        input that raises leaves no write behind, its earlier inputs' writes stay. A
        field is copied when the input first touches it, or at once if the operator held
        its value before: not the key's whole state per input."""
        self._undo = Undo(self._changed, tuple(self._data))
        for name in self._lent:
            self._remember(name)
        return self._undo

    def restore(self, undo: Undo) -> None:
        for name, old in undo.old.items():
            if old is _ABSENT:
                self._data.pop(name, None)
            else:
                self._data[name] = old
        if tuple(self._data) != undo.order:  # a field deleted and put back: its place
            self._data = {name: self._data[name] for name in undo.order}
        self._changed, self._undo = undo.changed, None

    def _remember(self, name: str) -> None:
        undo = self._undo
        if undo is not None and name not in undo.old:
            old = self._data.get(name, _ABSENT)
            undo.old[name] = old if old is _ABSENT else _copy(old)

    def save(self) -> None:
        if not self._changed:
            return
        if self._data:
            self._store.put(self._kind, self.group, self._key, self._data)
        else:
            self._store.delete(self._kind, self.group, self._key)

    def __getitem__(self, name: str) -> Any:
        value = self._data[name]
        if not isinstance(value, _SCALARS):
            self._remember(name)
            self._lent.add(name)
            self._changed = True  # it may be changed in place
        return value

    def __setitem__(self, name: str, value: Any) -> None:
        try:
            orjson.dumps(value)
        except TypeError as exc:
            raise TypeError(f"ctx.state[{name!r}]: not JSON-serialisable ({exc})") from None
        self._remember(name)
        self._data[name] = value
        if not isinstance(value, _SCALARS):
            self._lent.add(name)  # the caller holds it too
        self._changed = True

    def __delitem__(self, name: str) -> None:
        self._remember(name)
        del self._data[name]
        self._changed = True

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)
