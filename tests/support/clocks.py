"""The one test clock.

Tests start at the real current time (to the second) unless told otherwise and
move by hand from there. Not a fixed date by default: lookup items carry a TTL
derived from the domain clock, and the DynamoDB emulator (like DynamoDB)
deletes items whose TTL is in the real past, so a clock fixed in the past
would lose fresh tokens. Tests that need a fixed date pass one.
"""

from __future__ import annotations

from datetime import UTC, datetime

from adapters.system import ManualClock

START = datetime.now(UTC).replace(microsecond=0)


class FixedClock(ManualClock):
    """A clock that moves only when a test moves it; starts at ``start`` or ``START``."""

    def __init__(self, start: datetime | None = None) -> None:
        super().__init__(start or START)
