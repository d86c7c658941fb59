"""The example's operators on their own: no broker, no Spark."""

from types import SimpleNamespace

import pytest
from sps_sentiment.operators import Score, parse, reviews


def test_parse_lowercases_and_rejects_what_is_not_a_review():
    assert parse({"review_id": "r1", "text": "GREAT Box"}, None) == [
        (None, {"review_id": "r1", "text": "great box"})
    ]
    with pytest.raises(ValueError, match="'text' string"):
        parse({"review_id": "r2"}, None)


def test_the_model_fitted_in_open_scores_sentiment():
    score = Score()
    score.open(SimpleNamespace(operator="score"))
    [(_, good)] = score.process({"review_id": "a", "text": "excellent wonderful item"}, None)
    [(_, bad)] = score.process({"review_id": "b", "text": "terrible broken box"}, None)
    assert (good["label"], bad["label"]) == ("positive", "negative")
    score.close()


def test_reviews_are_reproducible():
    assert list(reviews(3, seed=1)) == list(reviews(3, seed=1))
