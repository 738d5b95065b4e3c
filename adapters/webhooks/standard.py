"""Standard Webhooks (standardwebhooks.com): the signature and the body.

A delivery carries ``webhook-id`` (the notification's deterministic id, so a
receiver can drop a repeat), ``webhook-timestamp`` (Unix seconds) and
``webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">``. A
``whsec_`` secret is the base64 of the key; any other secret is its UTF-8
bytes. The body is the redacted view plus ``type``: never a token, spec content
or an idempotency key (the views hold none).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

from domain.errors import InvalidInput

TOLERANCE_SECONDS = 300
SECRET_PREFIX = "whsec_"


def signing_key(secret: str) -> bytes:
    """The HMAC key of a subscription secret."""
    if secret.startswith(SECRET_PREFIX):
        try:
            return base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
        except ValueError:
            raise InvalidInput("webhook secret: not valid base64 after whsec_") from None
    if not secret:
        raise InvalidInput("webhook secret: empty")
    return secret.encode("utf-8")


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header value (one ``v1`` signature)."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(signing_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def headers(secret: str, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """Every header of one delivery."""
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret, message_id, timestamp, body),
        "content-type": "application/json",
    }


def verify(secret: str, received: Mapping[str, str], body: bytes, now: int) -> bool:
    """What a receiver checks: a fresh timestamp and one matching ``v1`` signature."""
    try:
        message_id = received["webhook-id"]
        timestamp = int(received["webhook-timestamp"])
        offered = received["webhook-signature"].split()
    except (KeyError, ValueError):
        return False
    if abs(now - timestamp) > TOLERANCE_SECONDS:
        return False
    expected = sign(secret, message_id, timestamp, body)
    return any(hmac.compare_digest(expected, candidate) for candidate in offered)


def body(kind: str, view: Mapping[str, Any]) -> bytes:
    """The delivery body: the redacted view plus ``type``, compact JSON."""
    return json.dumps({"type": kind, **view}, separators=(",", ":"), sort_keys=True).encode()
