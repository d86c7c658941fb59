"""The advertising example's operators on their own: no broker, no Spark."""

from types import SimpleNamespace

from sps_advertising.operators import CAMPAIGNS, Join, ad_projection, filter_views, generate


def test_only_views_pass_and_the_join_finds_the_campaign():
    view = {"ad_id": "ad7", "event_type": "view", "event_time": 1000}
    assert filter_views({**view, "event_type": "click"}, None) == []
    [(_, ev)] = filter_views(view, None)
    [(_, projected)] = ad_projection(ev, None)
    join = Join()
    join.open(SimpleNamespace(redis=None, prefix="t"))
    assert join.process(projected, None) == [(None, {**projected, "campaign_id": "campaign7"})]
    assert join.process({"ad_id": "unknown", "event_time": 1}, None) == []
    assert CAMPAIGNS["ad107"] == "campaign7"


def test_the_generator_is_deterministic_for_a_seed():
    assert list(generate(5, seed=3)) == list(generate(5, seed=3))
