import math

import pytest

from elastic_sps.model import topology
from elastic_sps.model.topology import TopologyError, from_dict

pytestmark = pytest.mark.unit


def doc(ops=None, edges=None):
    return {
        "name": "t",
        "operators": ops
        if ops is not None
        else [{"name": "a", "et_ms": 1.0}, {"name": "b", "et_ms": 2.0}],
        "edges": edges
        if edges is not None
        else [{"from": "source", "to": "a"}, {"from": "a", "to": "b", "fraction": 0.9}],
    }


@pytest.mark.parametrize("name", topology.builtin_names())
def test_builtins_load(name):
    t = topology.load(name)
    assert t.order[0] in t.entry_operators
    assert t.pool_total > 0


def test_builtin_set_is_complete():
    assert {"twitter", "twitter_complex", "dns", "log", "diamond", "advertising"} <= set(
        topology.builtin_names()
    )
    assert topology.load("twitter").pool_total == 32  # r_over of PA-SPS §4.1.4
    assert topology.load("twitter_complex").pool_total == 40  # §4.5
    assert topology.load("dns").pool_total == 12  # §4.6.2


def test_diamond_static_theta_is_fig6():
    t = topology.load("diamond")
    assert t.static_theta["O4"] == pytest.approx(0.58)


def test_the_path_time_is_the_longest_branch():
    """a (1 ms) feeds b (2 ms) and c (5 ms), both feed d (2 ms): the longest path is
    a, c, d, 8 ms; with 0.1 s per hop on its three operators, 0.308 s."""
    ops = [{"name": n, "et_ms": et} for n, et in (("a", 1.0), ("b", 2.0), ("c", 5.0), ("d", 2.0))]
    edges = [
        {"from": "source", "to": "a"},
        *({"from": "a", "to": x} for x in "bc"),
        *({"from": x, "to": "d"} for x in "bc"),
    ]
    t = from_dict(doc(ops, edges))
    assert t.path_seconds() == pytest.approx(0.008)
    assert t.path_seconds(0.1) == pytest.approx(0.308)


@pytest.mark.parametrize(
    ("d", "needle"),
    [
        (
            doc(
                edges=[
                    {"from": "source", "to": "a"},
                    {"from": "a", "to": "b"},
                    {"from": "b", "to": "a"},
                ]
            ),
            "cycle",
        ),
        (doc(edges=[{"from": "source", "to": "a"}, {"from": "a", "to": "zz"}]), "'zz'"),
        (
            doc(edges=[{"from": "source", "to": "a"}, {"from": "a", "to": "b", "fraction": -0.5}]),
            "a -> b",
        ),
        (
            doc(
                edges=[
                    {"from": "source", "to": "a"},
                    {"from": "a", "to": "b", "fraction": math.inf},
                ]
            ),
            "a -> b",
        ),
        (doc(edges=[{"from": "source", "to": "a"}]), "operator 'b': no path"),
        (doc(ops=[{"name": "a", "et_ms": 1, "cost": 2}, {"name": "b"}]), "unknown keys"),
        (doc(ops=[{"name": "a", "on_error": "ignore"}, {"name": "b"}]), "on_error: input"),
        (
            doc(
                ops=[
                    {"name": "a", "et_ms": 1, "min_replicas": 5, "max_replicas": 2},
                    {"name": "b", "et_ms": 1},
                ]
            ),
            "'a': min_replicas 5 is above",
        ),
        (doc(ops=[{"name": "a", "et_ms": -1}, {"name": "b", "et_ms": 1}]), "'a'"),
        (
            doc(
                edges=[{"from": "source", "to": "a"}, {"from": "a", "to": "b", "fraction": "lots"}]
            ),
            "a -> b",
        ),
    ],
)
def test_bad_topologies_name_the_culprit(d, needle):
    with pytest.raises(TopologyError) as err:
        from_dict(d, "bad.yaml")
    assert needle in str(err.value)


def test_yaml_file_roundtrip(tmp_path):
    import yaml

    t = topology.load("advertising")
    f = tmp_path / "ad.yaml"
    f.write_text(yaml.safe_dump(t.to_dict()))
    assert topology.load(str(f)) == t


def test_unknown_name_lists_builtins():
    with pytest.raises(TopologyError, match="twitter"):
        topology.load("nope")


def test_et_ms_may_be_left_out_until_measured():
    t = topology.from_dict(
        {"operators": [{"name": "a"}], "edges": [{"from": "source", "to": "a"}]}, "t.yaml"
    )
    assert not t.measured
    with pytest.raises(topology.TopologyError, match="'a' has no et_ms yet"):
        _ = t["a"].et_s
    filled = t.with_costs({"a": (2.0, 0.9)})
    assert filled.measured and filled["a"].et_s == 0.002 and filled["a"].cpu_bound


def test_cores_are_split_among_cpu_bound_operators_by_their_cpu_work():
    """Two CPU-bound operators in a chain, 1 ms and 3 ms of CPU (share 1) per event, on
    2 cores: processor sharing gives them 2 × 1/4 = 0.5 and 2 × 3/4 = 1.5 replicas' worth;
    a waiting operator (share 0.1) is not limited."""
    t = topology.from_dict(
        {
            "chain": False,  # each operator apart
            "operators": [
                {"name": "a", "et_ms": 1, "cpu_share": 1.0},
                {"name": "b", "et_ms": 3, "cpu_share": 1.0},
                {"name": "c", "et_ms": 5, "cpu_share": 0.1},
            ],
            "edges": [
                {"from": "source", "to": "a"},
                {"from": "a", "to": "b"},
                {"from": "b", "to": "c"},
            ],
        }
    )
    assert t.core_replicas(2) == {"a": 0.5, "b": 1.5}


def test_a_file_named_like_a_builtin_does_not_shadow_it(tmp_path, monkeypatch):
    from elastic_sps.model import topology as topology_mod

    monkeypatch.chdir(tmp_path)
    (tmp_path / "log").write_text("not yaml: [")
    assert topology_mod.load("log").operators  # the built-in, not the stray file
