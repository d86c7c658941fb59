"""The ensemble's services' health while they run: ``up`` restarts a service that exits,
but one that keeps running unhealthy (a dataplane whose query stopped on lost state, a
service that lost its broker) would only say so in its own log. This says it in ``up``'s
log too, once it has lasted ``REPORT_AFTER_S``, and again when the service is back."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

log = logging.getLogger("sps.supervisor")

EVERY_S = 5.0  # how often each service's /health is asked
REPORT_AFTER_S = 10.0  # unhealthy this long (a restart's warm-up is shorter) is reported
# a service whose /health says it is "starting" (a dataplane booting Spark, or taking
# over from another) is reported after this long: well past a boot on a loaded machine
STARTING_REPORT_AFTER_S = 120.0


class Service(Protocol):
    name: str
    port: int | None

    def alive(self) -> bool: ...


def health_of(port: int) -> tuple[bool, str]:
    """Whether the service on ``port`` answers its /health with 200, and what it said."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
            return r.status == 200, r.read(300).decode(errors="replace")
    except urllib.error.HTTPError as exc:  # a 503: the body says what is wrong
        return False, exc.read(300).decode(errors="replace")
    except OSError as exc:
        return False, f"no answer ({exc})"


def _starting(said: str) -> bool:
    try:
        return bool(json.loads(said).get("status") == "starting")
    except (ValueError, AttributeError):  # not a JSON object: a health check's own words
        return False


@dataclass
class HealthWatch:
    """Asks every ``EVERY_S``; ``since``: when each service was first seen unhealthy;
    ``reported``: those said to be so."""

    last: float = float("-inf")
    since: dict[str, float] = field(default_factory=dict)
    reported: set[str] = field(default_factory=set)

    def check(self, services: Iterable[Service], now: float) -> None:
        if now - self.last < EVERY_S:
            return
        self.last = now
        for s in services:
            if s.port is None or not s.alive():
                self.since.pop(s.name, None)  # an exit is the supervisor's to report
                continue
            ok, said = health_of(s.port)
            if ok:
                self.since.pop(s.name, None)
                if s.name in self.reported:
                    self.reported.discard(s.name)
                    log.warning("%s is healthy again", s.name)
                continue
            began = self.since.setdefault(s.name, now)
            allowed = STARTING_REPORT_AFTER_S if _starting(said) else REPORT_AFTER_S
            if now - began >= allowed and s.name not in self.reported:
                self.reported.add(s.name)
                log.warning(
                    "%s unhealthy for %.0f s (its /health: %s); see its log", s.name,
                    now - began, said.strip(),
                )  # fmt: skip
