"""What the engine being forecast adds to the fluid model, the live engine's calibration
(``LIVE_ENGINE``, which the simulator's forecasts and the ingress's admission bound both
use), and PA-SPS's t_out / q_size limits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from elastic_sps.model.keyed import moved_partitions


@dataclass(frozen=True)
class EngineModel:
    """What the engine being forecast adds to the fluid model (defaults: none).

    ``hop_s``: the time an event spends per operator beyond its own et and queue in a
    micro-batch engine: waiting for the operator's next batch and for the batch to end.
    ``efficiency``: the share of a replica's 1/et the engine delivers (the rest goes to
    per-batch planning and commits). ``plan_delay``: intervals from the end of the
    interval a plan saw to its effect (the MAPE services' lag); a fraction f runs the
    first f of an interval at the old counts (fluid mode: the interval's capacity is the
    time-weighted mix; event mode: whichever counts hold longer). ``et_cv2``: the
    execution time's squared coefficient of variation (0: deterministic). Calibrated from
    the live system (docs/measurements.md, "Simulator beside the live system")."""

    hop_s: float = 0.0
    efficiency: float = 1.0
    plan_delay: float = 0.0
    et_cv2: float = 0.0
    # the cores CPU-bound operators' replicas run on (None: unlimited): their replicas
    # share them (``Topology.core_replicas``), and the plan counts on no more
    cores: float | None = None
    # a keyed operator's resize: its moved partitions serve nothing for this long
    # (``keyed_move_loss``), plus this long per byte of state they hold
    keyed_move_s: float = 0.0
    keyed_move_s_per_byte: float = 0.0
    # the plan reads queue levels sampled at the interval's end, as a live monitor does:
    # beside the backlog, the events a steady flow holds on an operator's input (on
    # their hop, waiting, in service; Little's law), which a fluid interval has served
    levels_in_flight: bool = False


# Calibrated on this machine kind from dedicated runs, so in sample for any comparison
# made on them (`compare --live` is judged on other topologies and traces): the per-hop
# time on twitter_remote at a flat 50 % load, the share of 1/et a replica delivers
# (bench_capacity.py), when a live plan takes effect after the interval it saw (the
# rescale timelines), and a keyed operator's move, the extra wait of its moved partitions
# (bench_state.py; no state is copied, so no cost per byte). The figures:
# docs/measurements.md, "Figures moved out of code comments". The forecast
# (services/ensemble/live_compare.py) and the ingress's admission bound use it alike.
LIVE_ENGINE = EngineModel(
    hop_s=0.093, efficiency=0.85, plan_delay=0.5, keyed_move_s=0.011, levels_in_flight=True
)


def keyed_move_loss(
    pool: int, before: int, after: int, engine: EngineModel, td: float, state_bytes: float = 0.0
) -> float:
    """Replicas' worth of capacity a keyed operator loses over an interval in which its
    count changes: the moved partitions' share of its replicas is idle for the move's
    pause (``elastic_sps.model.keyed.moved_partitions``)."""
    pause = engine.keyed_move_s + engine.keyed_move_s_per_byte * state_bytes
    if before == after or pause <= 0:
        return 0.0
    moved = len(moved_partitions(pool, before, after)) / pool
    return moved * after * min(1.0, pause / td)


@dataclass(frozen=True)
class Handover:
    """An interval whose counts change ``late`` (a fraction of it) after it starts:
    ``before`` serve until then (``EngineModel.plan_delay``'s fraction)."""

    before: Mapping[str, int]
    late: float = 0.0

    def holding(self, after: Mapping[str, int]) -> Mapping[str, int]:
        """The counts that serve most of the interval (whole replicas: the event data
        plane's, the shedder's, the replica series')."""
        return self.before if self.late >= 0.5 else after

    def serving(self, name: str, after: int) -> float:
        """The replicas of ``name`` over the interval, time-weighted (a fluid queue's
        capacity over the interval is what matters)."""
        return self.late * self.before[name] + (1 - self.late) * after


@dataclass(frozen=True)
class Limits:
    """PA-SPS's t_out (seconds an event may live) and q_size (events an operator's queue
    holds); ``None``: off."""

    t_out_s: float | None = None
    q_size: float | None = None
