"""Opaque list cursors: the store's own position, base64url-encoded."""

from __future__ import annotations

import base64
import binascii
import re

from domain.errors import InvalidInput


def encode_cursor(raw: str | None) -> str | None:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=") if raw else None


def decode_cursor(token: str | None) -> str | None:
    if not token:
        return None
    if not re.fullmatch(r"[A-Za-z0-9_\-]+", token):
        raise InvalidInput("cursor: not a cursor this API returned")
    try:
        return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidInput("cursor: not a cursor this API returned") from None
