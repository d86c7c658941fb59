"""What happens when a user's operator raises (Kafka Streams' processing exception
handler, quix-streams' ``on_processing_error``, as a per-operator choice).

``on_error: dead-letter`` (the default): the event goes to the dead-letter topic with the
exception's type, message and last frames, and the stream goes on. But an operator that
fails on a large share of its events has a bug, not bad input: past ``max_share`` of the
last ``window`` events it stops the dataplane, named. ``on_error: fail``: the first
failure stops it.
"""

from __future__ import annotations

import importlib.util
import traceback
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from elastic_sps.model.topology import ON_ERROR


class OperatorFailing(RuntimeError):
    """A user's operator is broken: the dataplane stops (the message names it)."""


@dataclass(frozen=True)
class Failure:
    """One event an operator raised on: what the dead letter carries."""

    error_type: str
    message: str
    frames: str  # the last frames of the traceback, innermost last

    @property
    def reason(self) -> str:
        return f"{self.error_type}: {self.message}" if self.message else self.error_type


def _our_folders() -> tuple[str, ...]:
    """Where elastic-sps's own code lies: the library's folder and the services' (one
    folder inside it when installed, a sibling in a checkout)."""
    services = importlib.util.find_spec("elastic_sps.services")
    found = list(services.submodule_search_locations or []) if services else []
    return (str(Path(__file__).resolve().parents[1]), *(str(Path(p).resolve()) for p in found))


_OURS = _our_folders()


def user_frames(exc: BaseException, frames: int = 3) -> str:
    """The last ``frames`` frames of ``exc``'s traceback that are the user's code (not
    elastic-sps's or the import machinery's), innermost last."""
    tb = traceback.extract_tb(exc.__traceback__)
    theirs = [
        f
        for f in tb
        if not f.filename.startswith((*_OURS, "<frozen")) and "/importlib/" not in f.filename
    ]
    return "".join(traceback.format_list(theirs[-frames:]))


def describe(exc: BaseException, frames: int = 3) -> Failure:
    text = user_frames(exc, frames)
    reason = " ".join([str(exc), *getattr(exc, "__notes__", ())])  # a chain names its member
    return Failure(type(exc).__name__, reason, text)


# An operator raising on more than this share of its last WINDOW events stops the dataplane
# (the dataplane's options and the setting take these as their defaults)
MAX_FAILURE_SHARE = 0.5
FAILURE_WINDOW = 200


@dataclass
class FailureGuard:
    """Counts an operator's outcomes over its last ``window`` events (per task, since a
    task's worker sees a steady sample of the operator's input); ``record`` raises
    ``OperatorFailing`` when the policy says the operator must stop."""

    operator: str
    on_error: str = "dead-letter"
    max_share: float = MAX_FAILURE_SHARE
    window: int = FAILURE_WINDOW
    _last: deque[bool] = field(default_factory=deque)
    _failed: int = 0

    def __post_init__(self) -> None:
        if self.on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {ON_ERROR}, got {self.on_error!r}")
        self._last = deque(maxlen=self.window)

    def ok(self, n: int = 1) -> None:
        """``n`` events the operator took without raising (a slot folds its successes in
        at once: no lock per event)."""
        if n >= self.window:
            self._last.clear()
            self._last.extend([False] * self.window)
            self._failed = 0
            return
        for _ in range(n):
            self._push(False)

    def failed(self, failure: Failure) -> None:
        """Raises when this failure stops the operator; otherwise the caller dead-letters."""
        if self.on_error == "fail":
            raise OperatorFailing(
                f"operator {self.operator!r} raised {failure.reason} (on_error: fail)\n"
                f"{failure.frames}"
            )
        self._push(True)
        # Only a full window is judged: one bad event among the first few is not a bug.
        if len(self._last) == self.window and self._failed > self.max_share * self.window:
            raise OperatorFailing(
                f"operator {self.operator!r} failed on {self._failed} of its last "
                f"{self.window} events (more than {self.max_share:.0%}): a bug, not bad "
                f"input; the last: {failure.reason}\n{failure.frames}"
            )

    def _push(self, failed: bool) -> None:
        if len(self._last) == self._last.maxlen and self._last[0]:
            self._failed -= 1
        self._last.append(failed)
        self._failed += failed
