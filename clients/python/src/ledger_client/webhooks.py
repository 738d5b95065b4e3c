"""Verify the ledger's signed webhooks (Standard Webhooks) in a receiver.

A delivery carries ``webhook-id``, ``webhook-timestamp`` (Unix seconds) and
``webhook-signature``: one or more space-separated ``v1,<base64 HMAC-SHA256
of "id.timestamp.body">`` (several while a secret is being rotated). Verify
the raw body bytes exactly as received, before parsing them:

    verifier = WebhookVerifier(os.environ["LEDGER_WEBHOOK_SECRET"])
    event = verifier.verify(request.headers, request.body)  # WebhookVerificationError: answer 400

A ``whsec_`` secret is the base64 of the key; any other secret is its UTF-8
bytes (as the ledger signs). The timestamp must lie within ``tolerance`` of
now, so a captured delivery cannot be replayed later; drop a repeated
``webhook-id`` yourself (the ledger delivers at least once).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from ledger_client.errors import WebhookVerificationError

SECRET_PREFIX = "whsec_"
DEFAULT_TOLERANCE_SECONDS = 300


def signing_key(secret: str) -> bytes:
    """The HMAC key of a subscription secret."""
    if secret.startswith(SECRET_PREFIX):
        try:
            return base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("webhook secret: not valid base64 after whsec_") from None
    if not secret:
        raise ValueError("webhook secret: empty")
    return secret.encode("utf-8")


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The ``v1,<base64>`` signature of one delivery (for tests of a receiver)."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(signing_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


class WebhookVerifier:
    """Checks deliveries signed with one secret (make one per subscription)."""

    def __init__(
        self,
        secret: str,
        *,
        tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._key = signing_key(secret)
        self.tolerance_seconds = tolerance_seconds
        self._clock = clock

    def verify(self, headers: Mapping[str, str], body: bytes | str) -> dict[str, Any]:
        """The delivery's JSON body when its signature and timestamp verify;
        :class:`WebhookVerificationError` (saying which check failed) otherwise."""
        raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        lowered = {name.lower(): value for name, value in headers.items()}
        message_id = lowered.get("webhook-id")
        stamp = lowered.get("webhook-timestamp")
        offered = lowered.get("webhook-signature")
        if not message_id or not stamp or not offered:
            raise WebhookVerificationError("missing webhook-id, webhook-timestamp or signature")
        if not stamp.isdigit():
            raise WebhookVerificationError("webhook-timestamp is not Unix seconds")
        timestamp = int(stamp)
        if abs(self._clock() - timestamp) > self.tolerance_seconds:
            raise WebhookVerificationError("webhook-timestamp is outside the tolerance window")
        signed = f"{message_id}.{timestamp}.".encode() + raw
        expected = hmac.new(self._key, signed, hashlib.sha256).digest()
        if not any(hmac.compare_digest(expected, sig) for sig in _v1_signatures(offered)):
            raise WebhookVerificationError("no signature matches")
        try:
            event = json.loads(raw)
        except ValueError:
            raise WebhookVerificationError("the signed body is not JSON") from None
        if not isinstance(event, dict):
            raise WebhookVerificationError("the signed body is not a JSON object")
        return event


def _v1_signatures(header: str) -> list[bytes]:
    """The decoded ``v1`` signatures of the header (other versions are skipped)."""
    found = []
    for entry in header.split():
        version, _, value = entry.partition(",")
        if version != "v1" or not value:
            continue
        try:
            found.append(base64.b64decode(value, validate=True))
        except (binascii.Error, ValueError):
            continue
    return found
