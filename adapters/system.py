"""Real implementations of the clock and token ports."""

from __future__ import annotations

import secrets
import threading
from datetime import UTC, datetime, timedelta


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


class ManualClock:
    """A clock that only moves when told to: demos, tests and benchmarks."""

    def __init__(self, start: datetime | None = None) -> None:
        self.moment = start or datetime.now(UTC).replace(microsecond=0)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self.moment

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.moment += timedelta(seconds=seconds)
