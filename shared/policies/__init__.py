"""Elasticity policies by name. ``make_policy("pa-sps:lr", topo)`` or ``("static:8", topo)``.

Adding a policy: a module with a parameters dataclass and an object with ``name`` and
``analyze(stats) -> Analysis``, then one entry in ``_FACTORIES``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from elastic_sps.control.predictors import TRAINED
from elastic_sps.model.topology import Topology
from elastic_sps.policies.base import Analysis, OperatorDecision, Policy, PolicyConfigError
from elastic_sps.policies.pa_sps import PASPS, pa_sps, pa_sps_auto, pa_sps_bandit, presps
from elastic_sps.policies.static import Static

__all__ = [
    "PASPS",
    "Analysis",
    "OperatorDecision",
    "Policy",
    "PolicyConfigError",
    "Static",
    "make_policy",
    "policy_names",
]


def _utilisation(text: str, spec: str) -> float:
    try:
        u = float(text)
    except ValueError:
        msg = f"{spec}: utilisation {text!r} is not a number"
        raise PolicyConfigError(msg) from None
    if not 0 < u <= 1:
        raise PolicyConfigError(f"{spec}: utilisation must be in (0, 1], got {u}")
    return u


def _pa_sps(topo: Topology, arg: str | None, opts: dict[str, Any]) -> Policy:
    """``pa-sps:PREDICTOR`` or ``pa-sps:PREDICTOR@U``: Eq. 2 at a utilisation target U."""
    arg, _, u_text = (arg or opts.get("predictor") or "lr").partition("@")
    policy = _pa_sps_predictor(topo, arg, opts)
    if u_text:
        policy.target_utilisation = _utilisation(u_text, f"pa-sps:{arg}@{u_text}")
        policy.name = f"{policy.name}@{u_text}"
    return policy


def _pa_sps_predictor(topo: Topology, predictor: str, opts: dict[str, Any]) -> PASPS:
    kw = {k: opts[k] for k in ("retrain_every",) if opts.get(k) is not None}
    if predictor == "auto":  # the recently most accurate predictor (shared/control/selection.py)
        return pa_sps_auto(topo, **kw)
    if (
        predictor == "bandit"
    ):  # the authors' UCB bandit over the predictors (shared/control/bandit.py)
        goal = opts.get("latency_goal_ms")
        return pa_sps_bandit(topo, goal_ms=float(goal) if goal else 5_000.0, **kw)
    p = pa_sps(topo, predictor, **(kw if predictor in TRAINED else {}))
    p.eq7_weight = opts.get("eq7_weight") or "theta_p"
    p.name = f"pa-sps:{predictor}"
    return p


def _static(topo: Topology, arg: str | None, opts: dict[str, Any]) -> Policy:
    raw = arg if arg is not None else opts.get("replicas")
    if raw is None:
        raise PolicyConfigError("static needs a replica count: static:N or --replicas N")
    try:
        n = int(raw)
    except ValueError:
        raise PolicyConfigError(f"static: replica count {raw!r} is not an integer") from None
    p = Static(topo, n)
    p.name = f"static:{n}"
    return p


_FACTORIES: dict[str, Callable[[Topology, str | None, dict[str, Any]], Policy]] = {
    "pa-sps": _pa_sps,
    "presps": lambda topo, arg, opts: presps(topo),
    "static": _static,
}


def _with_budget(opts: dict[str, Any]) -> int | None:
    b = opts.get("budget")
    return int(b) if b is not None else None


def _register_others() -> None:
    from elastic_sps.policies.autoscale import Autoscale, AutoscaleParams
    from elastic_sps.policies.ds2 import DS2, DS2Params
    from elastic_sps.policies.lag import LagPolicy
    from elastic_sps.policies.reactive import Reactive
    from elastic_sps.policies.stela_policy import StelaPolicy

    def autoscale(topo: Topology, arg: str | None, opts: dict[str, Any]) -> Policy:
        # U: the top of the "medium" activity band (theta_max), above which it scales out
        u = opts.get("utilisation")
        params = AutoscaleParams(combine=arg or "max", theta_max=u or AutoscaleParams.theta_max)
        return Autoscale(topo, params, name=_named("autoscale", arg, u))

    def ds2(topo: Topology, arg: str | None, opts: dict[str, Any]) -> Policy:
        u = opts.get("utilisation")
        params = DS2Params(target_utilization=u or DS2Params.target_utilization)
        return DS2(topo, params, name=_named("ds2", arg, u))

    def reactive(topo: Topology, arg: str | None, opts: dict[str, Any]) -> Policy:
        u = opts.get("utilisation")  # the high mark it scales out above
        return Reactive(topo, high=u or Reactive.high, name=_named("reactive", arg, u))

    def default(topo: Topology, arg: str | None, opts: dict[str, Any]) -> Policy:
        from elastic_sps.settings import DEFAULT_PREDICTOR

        policy = _pa_sps(topo, DEFAULT_PREDICTOR, opts)
        policy.name = "default"
        return policy

    _FACTORIES["autoscale"] = autoscale
    _FACTORIES["stela"] = lambda topo, arg, opts: StelaPolicy(topo, _with_budget(opts))
    _FACTORIES["ds2"] = ds2
    _FACTORIES["lag"] = lambda topo, arg, opts: LagPolicy(topo, float(arg) if arg else 1000.0)
    _FACTORIES["reactive"] = reactive
    _FACTORIES["default"] = default


# the policies a utilisation target U moves along their saved/latency trade-off: NAME@U
UTILISATION_TARGETS = ("ds2", "autoscale", "reactive")


def _named(name: str, arg: str | None, u: float | None) -> str:
    return name + (f":{arg}" if arg else "") + (f"@{u:g}" if u is not None else "")


def register(name: str, factory: Callable[[Topology, str | None, dict[str, Any]], Policy]) -> None:
    _FACTORIES[name] = factory


def policy_names() -> list[str]:
    _register_others()
    return list(_FACTORIES)


def make_policy(spec: str, topo: Topology, **opts: Any) -> Policy:
    """``spec`` is ``name`` or ``name:arg`` (a predictor for pa-sps, a count for static),
    ``NAME@U`` a utilisation target for ``UTILISATION_TARGETS`` (``pa-sps:PREDICTOR@U``
    for pa-sps); ``default`` is the services' default policy."""
    _register_others()
    name, _, arg = spec.partition(":")
    name, _, u_text = name.partition("@")
    if not u_text and name in UTILISATION_TARGETS and "@" in arg:
        arg, _, u_text = arg.partition("@")
    if u_text:
        if name not in UTILISATION_TARGETS:
            raise PolicyConfigError(
                f"{spec}: {name} takes no @U (those that do: {', '.join(UTILISATION_TARGETS)}; "
                "pa-sps: pa-sps:PREDICTOR@U)"
            )
        opts = {**opts, "utilisation": _utilisation(u_text, spec)}
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise PolicyConfigError(
            f"unknown policy {name!r}; choose from {', '.join(_FACTORIES)}"
        ) from None
    return factory(topo, arg or None, opts)


def default_comparison() -> list[str]:
    """Every policy, PA-SPS once per predictor, plus the paper's static r = 1, 4, 8."""
    _register_others()
    specs = [f"pa-sps:{p}" for p in ("basic", "lr", "fft", "ann", "rf")] + ["presps"]
    specs += [n for n in _FACTORIES if n not in ("pa-sps", "presps", "static")]
    return [*specs, "static:1", "static:4", "static:8"]
