"""Nexmark events as JSON lines in Beam's encoding (``{"newPerson": {...}}``,
``{"newAuction": {...}}`` or ``{"bid": {...}}``, camelCase fields, ``dateTime`` in epoch
milliseconds).

``python -m sps_nexmark.generate --events N --rate EPS --seed S --out FILE``

The model follows the Nexmark specification as Beam's and the ``nexmark/nexmark``
suite's generators implement it, with their defaults: of every 50 events 1 is a new
person, 3 new auctions and 46 bids; ids start at 1000; event ``n``'s time is
``base + n / rate``; a bid is for a hot auction (the first of the last 100) with
probability 1/2 and by a hot bidder with probability 3/4, an auction by a hot seller
with probability 3/4; other people and auctions are drawn among the last 1,000 active
people and 100 in-flight auctions (plus 10 ids ahead); prices are 100 x 10^(6u) cents;
strings and the ``extra`` padding to the suite's average sizes (200, 500, 100 bytes).
Python's random numbers, so the same distributions, not the same values as Java's.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Iterator
from typing import Any

PERSON_PROPORTION, AUCTION_PROPORTION, BID_PROPORTION = 1, 3, 46
TOTAL = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION
FIRST_PERSON_ID = FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID, NUM_CATEGORIES = 10, 5
HOT_AUCTION_RATIO, HOT_SELLERS_RATIO, HOT_BIDDERS_RATIO = 2, 4, 4
HOT_GROUP = 100  # hot ids are the first of each batch of this many
NUM_IN_FLIGHT_AUCTIONS, NUM_ACTIVE_PEOPLE, ID_LEAD = 100, 1000, 10
AVG_PERSON_BYTES, AVG_AUCTION_BYTES, AVG_BID_BYTES = 200, 500, 100
US_STATES = ["AZ", "CA", "ID", "OR", "WA", "WY"]
US_CITIES = "Phoenix,Los Angeles,San Francisco,Boise,Portland,Bend,Redmond,Seattle,Kent,Cheyenne"
FIRST_NAMES = [
    "Peter",
    "Paul",
    "Luke",
    "John",
    "Saul",
    "Vicky",
    "Kate",
    "Julie",
    "Sarah",
    "Deiter",
    "Walter",
]
LAST_NAMES = [
    "Shultz",
    "Abrams",
    "Spencer",
    "White",
    "Bartels",
    "Walton",
    "Smith",
    "Jones",
    "Noris",
]
BASE_TIME_MS = 1_700_000_000_000  # a fixed start: a file is the same whatever day it is made


def last_person(event_id: int) -> int:
    """The newest person id (base 0) as of ``event_id``."""
    epoch, offset = divmod(event_id, TOTAL)
    return epoch * PERSON_PROPORTION + min(offset, PERSON_PROPORTION - 1)


def last_auction(event_id: int) -> int:
    """The newest auction id (base 0) as of ``event_id``."""
    epoch, offset = divmod(event_id, TOTAL)
    if offset < PERSON_PROPORTION:
        epoch, offset = epoch - 1, AUCTION_PROPORTION - 1
    elif offset >= PERSON_PROPORTION + AUCTION_PROPORTION:
        offset = AUCTION_PROPORTION - 1
    else:
        offset -= PERSON_PROPORTION
    return epoch * AUCTION_PROPORTION + offset


class Generator:
    def __init__(self, rate: float, seed: int = 0, base_ms: int = BASE_TIME_MS) -> None:
        self.rng = random.Random(seed)
        self.delay_us = 1_000_000.0 / rate
        self.base_ms = base_ms

    def time_of(self, n: int) -> int:
        return self.base_ms + int(n * self.delay_us) // 1000

    def string(self, max_length: int) -> str:
        n = 3 + self.rng.randrange(max_length - 3)
        s = "".join(
            " " if self.rng.randrange(13) == 0 else chr(97 + self.rng.randrange(26))
            for _ in range(n)
        )
        return s.strip()

    def extra(self, current: int, average: int) -> str:
        if current > average:
            return ""
        want = average - current
        delta = round(want * 0.2)
        size = want - delta + (self.rng.randrange(2 * delta) if delta else 0)
        return "".join(chr(97 + self.rng.randrange(26)) for _ in range(size))

    def price(self) -> int:
        return round(10.0 ** (self.rng.random() * 6.0) * 100.0)

    def some_person(self, event_id: int) -> int:
        people = last_person(event_id) + 1
        active = min(people, NUM_ACTIVE_PEOPLE)
        return people - active + self.rng.randrange(active + ID_LEAD)

    def some_auction(self, event_id: int) -> int:
        newest = last_auction(event_id)
        oldest = max(newest - NUM_IN_FLIGHT_AUCTIONS, 0)
        return oldest + self.rng.randrange(newest - oldest + 1 + ID_LEAD)

    def person(self, event_id: int, t: int) -> dict[str, Any]:
        name = f"{self.rng.choice(FIRST_NAMES)} {self.rng.choice(LAST_NAMES)}"
        email = f"{self.string(7)}@{self.string(5)}.com"
        card = " ".join(f"{self.rng.randrange(10000):04d}" for _ in range(4))
        city, state = self.rng.choice(US_CITIES.split(",")), self.rng.choice(US_STATES)
        size = 8 + len(name) + len(email) + len(card) + len(city) + len(state)
        return {"id": last_person(event_id) + FIRST_PERSON_ID, "name": name, "emailAddress": email,
                "creditCard": card, "city": city, "state": state, "dateTime": t,
                "extra": self.extra(size, AVG_PERSON_BYTES)}  # fmt: skip

    def auction(self, n: int, event_id: int, t: int) -> dict[str, Any]:
        if self.rng.randrange(HOT_SELLERS_RATIO) > 0:
            seller = last_person(event_id) // HOT_GROUP * HOT_GROUP
        else:
            seller = self.some_person(event_id)
        category = FIRST_CATEGORY_ID + self.rng.randrange(NUM_CATEGORIES)
        initial = self.price()
        ahead = NUM_IN_FLIGHT_AUCTIONS * TOTAL // AUCTION_PROPORTION
        horizon = self.time_of(n + ahead) - t
        expires = t + 1 + self.rng.randrange(max(horizon * 2, 1))
        name, desc = self.string(20), self.string(100)
        reserve = initial + self.price()
        size = 8 + len(name) + len(desc) + 40
        return {"id": last_auction(event_id) + FIRST_AUCTION_ID, "itemName": name,
                "description": desc, "initialBid": initial, "reserve": reserve,
                "dateTime": t, "expires": expires, "seller": seller + FIRST_PERSON_ID,
                "category": category, "extra": self.extra(size, AVG_AUCTION_BYTES)}  # fmt: skip

    def bid(self, event_id: int, t: int) -> dict[str, Any]:
        if self.rng.randrange(HOT_AUCTION_RATIO) > 0:
            auction = last_auction(event_id) // HOT_GROUP * HOT_GROUP
        else:
            auction = self.some_auction(event_id)
        if self.rng.randrange(HOT_BIDDERS_RATIO) > 0:
            bidder = last_person(event_id) // HOT_GROUP * HOT_GROUP + 1
        else:
            bidder = self.some_person(event_id)
        return {"auction": auction + FIRST_AUCTION_ID, "bidder": bidder + FIRST_PERSON_ID,
                "price": self.price(), "dateTime": t,
                "extra": self.extra(32, AVG_BID_BYTES)}  # fmt: skip

    def events(self, count: int) -> Iterator[dict[str, Any]]:
        for n in range(count):
            t = self.time_of(n)
            kind = n % TOTAL
            if kind < PERSON_PROPORTION:
                yield {"newPerson": self.person(n, t)}
            elif kind < PERSON_PROPORTION + AUCTION_PROPORTION:
                yield {"newAuction": self.auction(n, n, t)}
            else:
                yield {"bid": self.bid(n, t)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--events", type=int, required=True)
    p.add_argument("--rate", type=float, default=1000.0, help="events per second of event time")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    with open(a.out, "w") as f:
        for ev in Generator(a.rate, a.seed).events(a.events):
            f.write(json.dumps(ev) + "\n")


if __name__ == "__main__":
    main()
