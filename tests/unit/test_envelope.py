"""The event envelope: what travels, and what is refused with a reason."""

import pytest

from elastic_sps.io.envelope import BadEvent, Envelope, decode

pytestmark = pytest.mark.unit


def test_round_trip_keeps_the_id_times_and_payload():
    ev = Envelope("e-1", 1.5, "parse", {"text": "héllo", "n": [1, 2.5]}, adm=2.0, lasc=3.25)
    assert decode(ev.encode()) == ev
    assert decode(Envelope("e-2", 1.0, "source", "raw").encode()).adm is None


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (None, "empty"),
        (b"{not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "'id' and 'payload'"),
        (b'{"id": "x"}', "'id' and 'payload'"),
        (b'{"id": "x", "payload": 1, "ts": "soon"}', "bad envelope field"),
    ],
)
def test_malformed_events_are_refused_with_what_is_wrong(raw, reason):
    with pytest.raises(BadEvent, match=reason):
        decode(raw)


def test_a_payload_json_cannot_carry_is_refused_not_crashed():
    with pytest.raises(BadEvent, match="not serialisable"):
        Envelope("e-3", 1.0, "parse", {"tags": {1, 2}}).encode()
