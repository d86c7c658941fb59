"""``python -m sps_orders.generate --events N --rate EPS --seed S --out FILE``: orders as
JSON lines, ``rate`` orders per second of event time (``ts``, epoch seconds from 0)."""

from __future__ import annotations

import argparse
import json
import random


def orders(n: int, rate: float, seed: int = 0, customers: int = 200) -> list[dict]:
    """Customers drawn with a mild skew (weight 1/sqrt(rank)), as shops see."""
    rng = random.Random(seed)
    names = [f"c{k}" for k in range(customers)]
    weights = [1 / (k + 1) ** 0.5 for k in range(customers)]
    return [
        {
            "order_id": f"o{k}",
            "customer": rng.choices(names, weights)[0],
            "amount": round(rng.uniform(1, 100), 2),
            "ts": round(k / rate, 3),
        }
        for k in range(n)
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--events", type=int, default=20_000)
    p.add_argument("--rate", type=float, default=100.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    with open(a.out, "w") as f:
        for row in orders(a.events, a.rate, a.seed):
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
