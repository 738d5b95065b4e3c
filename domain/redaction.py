"""Secret-shape detection, output redaction and receipt validation (I10).

:func:`redact` is the one redaction every output uses (audit timelines, log
lines): values under listed or secret-shaped keys and secret-shaped strings
are replaced by ``REDACTED``; each caller passes the keys its output hides.

A receipt is stored only if it is small, flat and allow-listed: safe ids,
hashes, timestamps and bounded metadata. Anything that looks like a secret, in
a key or a value, makes the whole receipt unsafe: it is not stored and the
attempt becomes ``outcome_unknown``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any

MAX_RECEIPT_KEYS = 16
MAX_RECEIPT_VALUE_CHARS = 256
MAX_REASON_CHARS = 500
REDACTED = "[redacted]"

RECEIPT_KEY = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.:@/+\-# ]{0,256}$")

SECRET_KEY_WORDS = (
    "secret",
    "token",
    "password",
    "passwd",
    "credential",
    "auth",
    "cookie",
    "session",
    "private",
    "apikey",
    "api_key",
    "access_key",
    "signature",
    "bearer",
)

SECRET_VALUE_PATTERNS = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"sk_(live|test)_",
        r"\bbearer\s+\S+",
        r"\bbasic\s+[a-z0-9+/=]{8,}",
        r"-----begin [a-z ]*private key",
        r"\bAKIA[0-9A-Z]{16}\b",
        r"\beyJ[a-zA-Z0-9_\-]{8,}\.[a-zA-Z0-9_\-]{8,}",  # JWT
        r"\bgh[pousr]_[A-Za-z0-9]{20,}",
        r"\bxox[abpr]-[A-Za-z0-9\-]{10,}",
        r"\bwhsec_[A-Za-z0-9+/=]{16,}",  # a Standard Webhooks signing secret
        r"(password|passwd|secret|api[_-]?key|token)\s*[:=]",
    )
]


def looks_secret(text: str) -> bool:
    """True when text has the shape of a credential (or a planted test canary)."""
    return any(p.search(text) for p in SECRET_VALUE_PATTERNS)


def secret_shaped_key(key: str) -> bool:
    lowered = key.lower()
    return any(word in lowered for word in SECRET_KEY_WORDS)


def redact(value: Any, keys: Collection[str] = frozenset()) -> Any:
    """A copy of ``value`` fit for output: nested mappings and sequences are
    walked; the value under a key in ``keys`` (lower-case names, compared
    case-insensitively) or under a secret-shaped key, and every secret-shaped
    string, becomes ``REDACTED``."""
    if isinstance(value, Mapping):
        cleaned: dict[Any, Any] = {}
        for key, item in value.items():
            name = str(key).lower()
            hidden = name in keys or secret_shaped_key(name)
            cleaned[key] = REDACTED if hidden else redact(item, keys)
        return cleaned
    if isinstance(value, list | tuple):
        return [redact(item, keys) for item in value]
    if isinstance(value, str) and looks_secret(value):
        return REDACTED
    return value


def validate_receipt(data: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The receipt to store, or None when it is unsafe (then nothing is stored)."""
    if data is None:
        return {}
    if not isinstance(data, Mapping) or len(data) > MAX_RECEIPT_KEYS:
        return None
    safe: dict[str, Any] = {}
    for key, value in data.items():
        if not isinstance(key, str) or not RECEIPT_KEY.match(key) or secret_shaped_key(key):
            return None
        if isinstance(value, bool) or value is None:
            safe[key] = value
        elif isinstance(value, int):
            if abs(value) > 2**53 - 1:
                return None
            safe[key] = value
        elif isinstance(value, str):
            if not SAFE_VALUE.match(value) or looks_secret(value):
                return None
            safe[key] = value
        else:
            return None
    return safe


def check_reason(reason: str) -> str | None:
    """A safe free-text reason (admin resolution), or None when it is not acceptable."""
    text = reason.strip()
    if not text or len(text) > MAX_REASON_CHARS or looks_secret(text):
        return None
    if any(ord(ch) < 32 and ch not in "\t" for ch in text):
        return None
    return text
