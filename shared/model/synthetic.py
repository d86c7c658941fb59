"""Generated topologies for scale benchmarks and tests."""

from __future__ import annotations

from elastic_sps.model.topology import SOURCE, Edge, Operator, Topology, TopologyError


def generated_dag(operators: int, pool: int, seed: int = 0, width: int = 10) -> Topology:
    """A random layered DAG of ``operators`` operators in layers of up to ``width``, each
    with a pool of ``pool`` replicas (for scale benchmarks). Every operator of a layer
    reads from one to three operators of the layer before; a predecessor (the source included)
    splits its output evenly over its successors, so every operator is reached. et_ms in 1-10 ms."""
    import itertools
    import random

    if operators < 1 or width < 1 or pool < 1:
        raise TopologyError("a generated DAG needs operators, width and pool >= 1")
    rng = random.Random(seed)
    names = [f"op{k:03d}" for k in range(operators)]
    layers = [names[k : k + width] for k in range(0, operators, width)]
    parents: dict[str, list[str]] = {n: [SOURCE] for n in layers[0]}
    for prev, layer in itertools.pairwise(layers):
        for n in layer:
            parents[n] = rng.sample(prev, k=min(len(prev), rng.randint(1, 3)))
        for p in prev:  # nobody upstream is left without a successor
            if not any(p in parents[n] for n in layer):
                parents[rng.choice(layer)].append(p)
    children: dict[str, int] = {}
    for ps in parents.values():
        for p in ps:
            children[p] = children.get(p, 0) + 1
    edges = tuple(Edge(p, n, 1.0 / children[p]) for n in names for p in parents[n])
    ops = tuple(Operator(n, round(rng.uniform(1.0, 10.0), 1), 1, pool) for n in names)
    return Topology(f"dag-{operators}x{pool}", ops, edges)
