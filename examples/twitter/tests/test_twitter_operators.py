"""The Twitter example's operators on their own: no broker, no Spark."""

from types import SimpleNamespace

import pytest
from sps_twitter.operators import classify_author, classify_content, generate, parse, store


def test_a_tweet_goes_through_every_operator():
    tweet = {
        "text": "the election vote today",
        "user": {"screen_name": "ana", "followers_count": 20_000, "verified": False},
    }
    [(_, parsed)] = parse(tweet, None)
    [(_, content)] = classify_content(parsed, None)
    [(_, author)] = classify_author(content, None)
    [(_, out)] = store(author, SimpleNamespace(writes=None, prefix="t"))
    assert out == {"user": "ana", "topic": "politics", "author_class": "influencer"}


def test_parse_rejects_a_tweet_without_text():
    with pytest.raises(ValueError, match="'text' string"):
        parse({"user": {}}, None)


def test_generated_tweets_parse():
    assert all(parse(t, None) for t in generate(50))
