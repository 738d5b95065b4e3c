"""Real implementations of the clock and token ports."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime


class SystemClock:
    """Wall-clock UTC time."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class SecretsTokenSource:
    """256-bit opaque tokens and 128-bit random ids from ``secrets``."""

    def new_token(self) -> str:
        return secrets.token_urlsafe(32)

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{secrets.token_hex(16)}"
