"""A keyed operator's resizes as the run folder tells them: each change in
``rescales.json`` with the partitions and key groups that changed owner, the bytes of
state they held (read by the new owners, never copied), and its pause: the longest a
moved partition's events waited between the old owner's last commit and the new owner's
first event (``services/dataplane/keyed_slot.handover_pause``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def attach(
    rows: Sequence[dict[str, Any]],
    moves: Sequence[Mapping[str, Any]],
    pauses: Mapping[str, Sequence[Mapping[str, Any]]],
) -> list[dict[str, Any]]:
    """``rows`` (rescales.json's) with each keyed change's move and pause."""
    out = []
    for row in rows:
        op = row["operator"]
        move = next(
            (
                m
                for m in moves
                if m["operator"] == op
                and (m["from"], m["to"]) == (row["before"], row["after"])
                and abs(m["at"] - row["effect_at"]) < 1.0
            ),
            None,
        )
        if move is None:
            out.append(dict(row))
            continue
        later = [
            r["effect_at"]
            for r in rows
            if r["operator"] == op and r["effect_at"] > row["effect_at"]
        ]
        until = min(later, default=float("inf"))
        waited = [
            p["pause_s"]
            for p in pauses.get(op, ())
            if p.get("moved", True)
            and p["partition"] in move["partitions"]
            and row["effect_at"] <= p["at"] < until
        ]
        out.append(
            {
                **row,
                "moved_partitions": move["partitions"],
                "key_groups_moved": move["key_groups"],
                "state_bytes_moved": move["state_bytes"],
                "pause_s": max(waited) if waited else None,
            }
        )
    return out


def summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The report's figures over the keyed changes: how many, what moved, the pauses."""
    keyed = [r for r in rows if "moved_partitions" in r]
    pauses = [r["pause_s"] for r in keyed if r["pause_s"] is not None]
    return {
        "moves": len(keyed),
        "key_groups_moved": sum(r["key_groups_moved"] for r in keyed),
        "state_bytes_moved": sum(r["state_bytes_moved"] for r in keyed),
        "pause_s": {
            "median": round(float(np.median(pauses)), 3) if pauses else None,
            "p99": round(float(np.percentile(pauses, 99)), 3) if pauses else None,
            "max": round(max(pauses), 3) if pauses else None,
        },
    }
