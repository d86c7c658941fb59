"""Plan stabilisation: fewer, calmer rescales, for every policy (PA-SPS included).

Two rules, both off by default (the papers' policies run as written):

* a **scale-down stabilisation window** of N intervals: an operator is scaled in only to
  the highest count any policy recommendation of the last N intervals asked for (the
  Kubernetes HPA's ``stabilizationWindowSeconds`` for scale-down), so a dip of one
  interval between two busy ones changes nothing; scale-out is never delayed;
* a **maximum change per step**: at most ``max_step`` replicas added or removed per
  operator per plan.

Why: a per-interval predictor on a bursty input flaps (PA-SPS changed counts 118 times in
90 s live), and every change costs a micro-batch's re-planning and re-routing.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Stabilisation:
    scale_down_window: int = 0  # intervals; 0: scale in as soon as the policy says
    max_step: int | None = None  # replicas per operator per plan; None: unbounded

    @property
    def enabled(self) -> bool:
        return self.scale_down_window > 0 or self.max_step is not None


@dataclass
class Stabiliser:
    """Keeps each operator's recent recommendations; ``apply`` limits one plan."""

    rules: Stabilisation
    _seen: dict[str, deque[int]] = field(default_factory=dict)

    def apply(
        self, current: Mapping[str, int], wanted: Mapping[str, int]
    ) -> tuple[dict[str, int], dict[str, str]]:
        """The targets after the rules, and per operator the rule that limited it."""
        out: dict[str, int] = {}
        limited: dict[str, str] = {}
        for name, want in wanted.items():
            seen = self._seen.setdefault(name, deque(maxlen=max(1, self.rules.scale_down_window)))
            seen.append(want)
            cur = current.get(name, want)
            target = want
            if self.rules.scale_down_window > 0 and want < cur:
                target = min(cur, max(seen))
                if target != want:
                    limited[name] = "scale-down window"
            step = self.rules.max_step
            if step is not None and abs(target - cur) > step:
                target = cur + step if target > cur else cur - step
                limited[name] = "max step"
            out[name] = target
        return out, limited
