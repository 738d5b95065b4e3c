"""Standard Webhooks signatures: the published test vector, and what a receiver refuses."""

from __future__ import annotations

import pytest

from adapters.webhooks.standard import body, headers, sign, verify
from domain.errors import InvalidInput

# the example of the Standard Webhooks specification
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MESSAGE_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
TIMESTAMP = 1614265330
PAYLOAD = b'{"test": 2432232314}'
EXPECTED = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_the_published_vector_signs_the_same() -> None:
    assert sign(SECRET, MESSAGE_ID, TIMESTAMP, PAYLOAD) == EXPECTED


def test_a_receiver_accepts_a_fresh_signed_delivery_and_nothing_else() -> None:
    sent = headers(SECRET, MESSAGE_ID, TIMESTAMP, PAYLOAD)
    assert verify(SECRET, sent, PAYLOAD, TIMESTAMP + 10)
    assert not verify(SECRET, sent, PAYLOAD + b" ", TIMESTAMP)  # body changed
    assert not verify("whsec_" + "A" * 32, sent, PAYLOAD, TIMESTAMP)  # other secret
    assert not verify(SECRET, sent, PAYLOAD, TIMESTAMP + 301)  # stale
    assert not verify(SECRET, {**sent, "webhook-id": "msg_other"}, PAYLOAD, TIMESTAMP)
    assert not verify(SECRET, {}, PAYLOAD, TIMESTAMP)
    rotated = {**sent, "webhook-signature": "v1,bm90LWl0 " + sent["webhook-signature"]}
    assert verify(SECRET, rotated, PAYLOAD, TIMESTAMP)


def test_a_plain_secret_is_its_bytes_and_a_bad_whsec_is_refused() -> None:
    assert sign("plain-secret", MESSAGE_ID, TIMESTAMP, PAYLOAD).startswith("v1,")
    with pytest.raises(InvalidInput):
        sign("whsec_***", MESSAGE_ID, TIMESTAMP, PAYLOAD)
    with pytest.raises(InvalidInput):
        sign("", MESSAGE_ID, TIMESTAMP, PAYLOAD)


def test_the_body_is_the_view_plus_type() -> None:
    sent = body("attempt.succeeded", {"attempt_id": "att_1", "status": "succeeded"})
    assert sent == b'{"attempt_id":"att_1","status":"succeeded","type":"attempt.succeeded"}'
