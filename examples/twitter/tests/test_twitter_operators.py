"""The Twitter example's operators on their own: no broker, no Spark."""

from pathlib import Path

import pytest
from sps_twitter.operators import generate, parse

from elastic_sps.api import run_local

pytestmark = pytest.mark.unit

TOPOLOGY = Path(__file__).parents[1] / "topology.yaml"


def test_a_tweet_goes_through_every_operator():
    tweet = {
        "text": "the election vote today",
        "user": {"screen_name": "ana", "followers_count": 20_000, "verified": False},
    }
    run = run_local(TOPOLOGY, [tweet, {"user": {}}])
    assert run.outputs == {
        "twitter.classified": [{"user": "ana", "topic": "politics", "author_class": "influencer"}]
    }
    [letter] = run.dead_letters
    assert letter.operator == "parse" and "'text' string" in letter.reason


def test_parse_rejects_a_tweet_without_text():
    with pytest.raises(ValueError, match="'text' string"):
        parse({"user": {}}, None)


def test_generated_tweets_parse():
    assert all(parse(t, None) for t in generate(50))
