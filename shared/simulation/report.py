"""Tables and plots of simulation runs (the layout of PA-SPS Tables 2-3 and Fig. 9)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from elastic_sps.simulation.simulator import SimulationResult

COLUMNS = [
    ("saved_resources", "Saved Resources", "{:.3f}"),
    ("throughput_degradation", "Throughput Degradation", "{:.3f}"),
    ("processed_ratio", "Diff. Proc. Events", "{:.4f}"),
    ("latency_ms", "Latency (ms)", "{:.1f}"),
    ("error_input", "Error Est. Input", "{:.3f}"),
    ("error_replica", "Error Est. Replica", "{:.3f}"),
    ("replicas_mean", "Replicas mean", "{:.2f}"),
    ("replicas_max", "Replicas max", "{}"),
    ("reconfigurations", "Reconfig.", "{}"),
]


def table(results: Sequence[SimulationResult], title: str) -> Table:
    t = Table(title=title)
    t.add_column("Policy")
    for _, head, _ in COLUMNS:
        t.add_column(head, justify="right")
    for r in results:
        d = r.metrics.as_dict()
        t.add_row(r.policy, *(fmt.format(d[key]) for key, _, fmt in COLUMNS))
    return t


def print_table(results: Sequence[SimulationResult], title: str) -> None:
    Console(width=200).print(table(results, title))


def plot(results: Sequence[SimulationResult], path: str | Path) -> None:
    """Input rate vs throughput (events/s) and total active replicas over time (Fig. 9)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
    first = results[0]
    t = np.arange(len(first.series.input_events)) * first.td
    ax1.plot(
        t, np.asarray(first.series.input_events) / first.td, color="black", lw=1, label="input"
    )
    for r in results:
        ax1.plot(
            t, np.asarray(r.series.entry_processed) / r.td, lw=0.8, label=f"{r.policy} throughput"
        )
        ax2.plot(t, r.series.total_replicas(), lw=0.8, label=r.policy)
    ax1.set_ylabel("events/s")
    ax1.legend(fontsize=7, loc="upper right")
    ax2.set_ylabel("active replicas")
    ax2.set_xlabel("time (s)")
    ax2.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
