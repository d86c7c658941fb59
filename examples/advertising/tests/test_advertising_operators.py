"""The advertising example's operators on their own: no broker, no Spark."""

import pytest
from sps_advertising.operators import CAMPAIGNS, generate

from elastic_sps.api import run_local

pytestmark = pytest.mark.unit


def test_only_views_of_known_ads_reach_the_campaign_counts():
    view = {"ad_id": "ad7", "event_type": "view", "event_time": 1000}
    events = [view, {**view, "event_type": "click"}, {**view, "ad_id": "unknown"}, {"x": 1}]
    run = run_local("advertising", events)
    # the 2 views go to both projections; only the known ad's reaches the counts
    assert run.received == {
        "deserialize": 4,
        "filter": 3,
        "ip_projection": 2,
        "ad_projection": 2,
        "join": 2,
        "ip_processor": 2,
        "campaign_processor": 1,
    }
    [letter] = run.dead_letters
    assert (letter.operator, letter.event_id) == ("deserialize", "local/3")
    assert CAMPAIGNS["ad107"] == "campaign7"


def test_the_generator_is_deterministic_for_a_seed():
    assert list(generate(5, seed=3)) == list(generate(5, seed=3))
