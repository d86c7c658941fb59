"""LAS throughput: shedder decisions/s and operator updates/s on one core, and the
duration of one default shed-sim run.

Run: .venv/bin/python benchmarks/bench_las.py
"""

from __future__ import annotations

import json
import time

import numpy as np

from elastic_sps.las import shed_sim
from elastic_sps.las.operator_side import LasOperator
from elastic_sps.las.shedder import AverageQueuingLatency, LasShedder


def best_of(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    n = 1_000_000
    rng = np.random.default_rng(0)
    p = shed_sim.item_probabilities("zipf-1.0", 4096)
    keys = rng.choice(4096, size=n, p=p).astype(np.int64)
    durations = 0.0001 * (1 + keys % 64)
    sent = []
    op = LasOperator(sent.append, lambda d: None, window=1024, seed=1)
    t_op = best_of(lambda: op.update_batch(keys, durations), repeat=1)
    assert sent, "operator never produced a stable sketch"
    now = np.arange(n) * (float(durations.mean()) * 0.75)

    def decide() -> None:
        shedder = LasShedder(AverageQueuingLatency(0.0064))
        shedder.receive_sketch(sent[-1])
        for s in range(0, n, 8192):
            shedder.shed_batch(keys[s : s + 8192], now[s : s + 8192])

    t_shed = best_of(decide)
    setup = shed_sim.Setup()
    stream = shed_sim.make_stream(setup, 0)
    t_sim = best_of(lambda: shed_sim.run("las", setup, stream, 0))
    print(
        json.dumps(
            {
                "operator_updates_per_s": round(n / t_op),
                "shedder_decisions_per_s": round(n / t_shed),
                "shed_sim_default_run_s": round(t_sim, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
