"""The client's Standard Webhooks verifier: what the ledger signs verifies, and a
forged, stale, replayed-late or tampered delivery does not."""

from __future__ import annotations

import base64
import json

import pytest

from adapters.webhooks.standard import headers as ledger_headers
from ledger_client import WebhookVerifier
from ledger_client.errors import WebhookVerificationError
from ledger_client.webhooks import sign

SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()
BODY = json.dumps({"type": "attempt.succeeded", "attempt_id": "att_1"}).encode()
NOW = 1_900_000_000


def verifier(secret: str = SECRET, now: float = NOW, tolerance: int = 300) -> WebhookVerifier:
    return WebhookVerifier(secret, tolerance_seconds=tolerance, clock=lambda: now)


@pytest.mark.parametrize("secret", [SECRET, "a plain passphrase secret"])
def test_what_the_ledger_signs_verifies(secret: str) -> None:
    signed = ledger_headers(secret, "msg_1", NOW, BODY)
    assert verifier(secret).verify(signed, BODY) == json.loads(BODY)
    upper = {name.title(): value for name, value in signed.items()}  # header names any case
    assert verifier(secret).verify(upper, BODY.decode())["attempt_id"] == "att_1"


def test_the_standard_webhooks_reference_vector_verifies() -> None:
    # The example of the Standard Webhooks specification.
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = b'{"test": 2432232314}'
    headers = {
        "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
        "webhook-timestamp": "1614265330",
        "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    }
    assert verifier(secret, now=1614265330).verify(headers, body) == {"test": 2432232314}


def test_any_of_several_signatures_may_match_during_a_rotation() -> None:
    old = sign("whsec_" + base64.b64encode(b"o" * 32).decode(), "msg_1", NOW, BODY)
    new = sign(SECRET, "msg_1", NOW, BODY)
    headers = {"webhook-id": "msg_1", "webhook-timestamp": str(NOW)}
    for offered in (f"{old} {new}", f"v1a,xyz {new}", f"{new} {old}"):
        assert verifier().verify({**headers, "webhook-signature": offered}, BODY)
    with pytest.raises(WebhookVerificationError, match="no signature matches"):
        verifier().verify({**headers, "webhook-signature": f"{old} v2,{new[3:]}"}, BODY)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"body": BODY + b" "}, "no signature matches"),
        ({"webhook-id": "msg_2"}, "no signature matches"),
        ({"secret": "whsec_" + base64.b64encode(b"x" * 32).decode()}, "no signature matches"),
        ({"webhook-signature": "v1,not base64!"}, "no signature matches"),
        ({"webhook-timestamp": "soon"}, "not Unix seconds"),
        ({"webhook-signature": None}, "missing"),
        ({"now": NOW + 301}, "outside the tolerance"),
        ({"now": NOW - 301}, "outside the tolerance"),
    ],
)
def test_a_forged_stale_or_tampered_delivery_is_refused(
    change: dict[str, object], why: str
) -> None:
    headers: dict[str, str] = ledger_headers(SECRET, "msg_1", NOW, BODY)
    for name in ("webhook-id", "webhook-timestamp", "webhook-signature"):
        if name in change:
            value = change[name]
            if value is None:
                del headers[name]
            else:
                headers[name] = str(value)
    check = verifier(str(change.get("secret", SECRET)), now=float(str(change.get("now", NOW))))
    with pytest.raises(WebhookVerificationError, match=why) as raised:
        check.verify(headers, bytes(change.get("body", BODY)))  # type: ignore[arg-type]
    assert raised.value.code == "webhook_invalid"


def test_the_window_edges_are_inside_and_the_tolerance_is_the_callers() -> None:
    headers = ledger_headers(SECRET, "msg_1", NOW, BODY)
    assert verifier(now=NOW + 300).verify(headers, BODY)
    assert verifier(now=NOW - 300).verify(headers, BODY)
    with pytest.raises(WebhookVerificationError):
        verifier(now=NOW + 31, tolerance=30).verify(headers, BODY)


def test_a_bad_secret_is_refused_when_the_verifier_is_made() -> None:
    with pytest.raises(ValueError, match="base64"):
        WebhookVerifier("whsec_***")
    with pytest.raises(ValueError, match="empty"):
        WebhookVerifier("")
