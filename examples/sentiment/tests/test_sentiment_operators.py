"""The example's operators on their own: no broker, no Spark."""

from pathlib import Path

import pytest
from sps_sentiment.operators import parse, reviews

from elastic_sps.api import run_local

pytestmark = pytest.mark.unit

TOPOLOGY = Path(__file__).parents[1] / "topology.yaml"


def test_parse_lowercases_and_rejects_what_is_not_a_review():
    assert parse({"review_id": "r1", "text": "GREAT Box"}, None) == [
        (None, {"review_id": "r1", "text": "great box"})
    ]
    with pytest.raises(ValueError, match="'text' string"):
        parse({"review_id": "r2"}, None)


def test_the_model_fitted_in_open_scores_sentiment():
    reviews_in = [
        {"review_id": "a", "user": "u1", "text": "excellent wonderful item"},
        {"review_id": "b", "user": "u2", "text": "terrible broken box"},
    ]
    scored = run_local(TOPOLOGY, reviews_in).outputs["sentiment.scored"]
    assert [(r["review_id"], r["label"]) for r in scored] == [("a", "positive"), ("b", "negative")]


def test_reviews_are_reproducible():
    assert list(reviews(3, seed=1)) == list(reviews(3, seed=1))
