"""A decision record (``sps.decisions``) in words, for ``elastic-sps explain``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# How each input reads in a sentence; an input not listed is printed as name = value.
INPUT_WORDS = {
    "predicted_input": "predicted input {v:,.0f} events",
    "theta": "share of the input reaching it (θ) {v:.3f}",
    "predicted_received": "predicted to receive {v:,.1f} events",
    "queue": "queue {v:,.1f} events",
    "et_ms": "execution time {v:.2f} ms per event",
    "td_s": "interval {v:g} s",
}


def describe(d: Mapping[str, Any]) -> str:
    """One decision, as a short paragraph."""
    lo, hi = d["pool"]
    inputs = "; ".join(
        INPUT_WORDS.get(k, k + " = {v:g}").format(v=v) for k, v in d.get("inputs", {}).items()
    )
    change = d["chosen"] - d["current"]
    verb = "keeps" if change == 0 else ("scales out to" if change > 0 else "scales in to")
    lines = [
        f"interval {d['interval']}, operator {d['operator']} (pool {lo}-{hi}), "
        f"policy {d['policy']}:",
        f"  inputs: {inputs or 'none recorded'}",
        f"  rule: {d.get('rule') or 'the policy' + chr(39) + 's own'} -> {d.get('raw', 0):.2f}"
        f" replicas, asked {d['asked']}",
        f"  the plan {verb} {d['chosen']} (was {d['current']})"
        + (f", limited by {', '.join(d['limited_by'])}" if d.get("limited_by") else ""),
    ]
    if d.get("dry_run"):
        lines.append("  dry run: execute changed nothing")
    return "\n".join(lines)


def find(
    decisions: Iterable[Mapping[str, Any]], operator: str | None, interval: int | None
) -> list[Mapping[str, Any]]:
    return [
        d
        for d in decisions
        if (operator is None or d["operator"] == operator)
        and (interval is None or d["interval"] == interval)
    ]


def describe_move(row: Mapping[str, Any]) -> str:
    """A keyed operator's resize (a ``rescales.json`` row with its move), in words."""
    pause = row.get("pause_s")
    waited = f"{1000 * pause:.0f} ms" if pause is not None else "not measured"
    return (
        f"operator {row['operator']} {row['before']} -> {row['after']} replicas (plan "
        f"{row['plan_id']}): partitions {row['moved_partitions']} changed owner with "
        f"{row['key_groups_moved']} key groups and {row['state_bytes_moved']:,} bytes of state "
        f"(read by the new owners, not copied); their events waited at most {waited}"
    )
