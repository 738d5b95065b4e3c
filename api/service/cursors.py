"""Lists: opaque cursors (the store's own position, base64url-encoded) and page sizes."""

from __future__ import annotations

import base64
import binascii
import re

from domain.errors import InvalidInput

DEFAULT_PAGE = 50
MAX_PAGE = 200


def page_size(limit: int) -> int:
    """A page size within 1..MAX_PAGE (over HTTP the query refuses others first)."""
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInput.at("/limit", f"must be 1..{MAX_PAGE}", "query")
    return limit


def encode_cursor(raw: str | None) -> str | None:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=") if raw else None


def decode_cursor(token: str | None) -> str | None:
    if not token:
        return None
    if not re.fullmatch(r"[A-Za-z0-9_\-]+", token):
        raise InvalidInput.at("/cursor", "not a cursor this API returned", "query")
    try:
        return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidInput.at("/cursor", "not a cursor this API returned", "query") from None
