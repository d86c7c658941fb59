"""Reviews in, sentiment out: ``parse`` checks a review, ``Score`` (a class operator)
fits a small text classifier in ``open`` (once per worker process) and scores each
review with it: CPU-bound work, so elastic-sps serves its replicas as separate
processes, up to the cores."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

POSITIVE = ["great", "love", "excellent", "wonderful", "perfect", "happy", "fast", "best"]
NEGATIVE = ["awful", "hate", "broken", "terrible", "slow", "worst", "refund", "late"]
NEUTRAL = ["the", "product", "arrived", "box", "it", "was", "and", "delivery", "a", "item"]


def reviews(n: int, seed: int = 0) -> Iterator[dict[str, Any]]:
    """Labelled-looking reviews: a few neutral words around sentiment words."""
    rng = random.Random(seed)
    for k in range(n):
        good = rng.random() < 0.6
        words = rng.choices(POSITIVE if good else NEGATIVE, k=rng.randint(1, 3))
        words += rng.choices(NEUTRAL, k=rng.randint(4, 12))
        rng.shuffle(words)
        yield {"review_id": f"r{k}", "user": f"u{rng.randint(1, 500)}", "text": " ".join(words)}


def parse(review: Any, ctx: Any) -> list[tuple[str | None, Any]]:
    if not isinstance(review, dict) or not isinstance(review.get("text"), str):
        raise ValueError("a review is an object with a 'text' string")
    return [(None, {"review_id": review.get("review_id"), "text": review["text"].lower()})]


class Score:
    """TF-IDF + logistic regression, fitted in ``open`` on generated labelled reviews."""

    def open(self, ctx: Any) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline

        train = list(reviews(2000, seed=42))
        labels = [int(any(w in POSITIVE for w in r["text"].split())) for r in train]
        self.model = make_pipeline(
            TfidfVectorizer(ngram_range=(1, 2)), LogisticRegression(max_iter=200)
        )
        self.model.fit([r["text"] for r in train], labels)

    def process(self, review: Any, ctx: Any) -> list[tuple[str | None, Any]]:
        p = float(self.model.predict_proba([review["text"]])[0, 1])
        label = "positive" if p >= 0.5 else "negative"
        return [(None, {"review_id": review["review_id"], "label": label, "p": round(p, 3)})]

    def close(self) -> None:
        self.model = None
