"""The one test clock.

Tests start at the real current time (to the second) unless told otherwise and
move by hand from there. Not a fixed date by default: lookup items carry a TTL
derived from the domain clock, and the DynamoDB emulator (like DynamoDB)
deletes items whose TTL is in the real past, so a clock fixed in the past
would lose fresh tokens. Tests that need a fixed date pass one.

The real time when the clock is made, not when the session began: a
presentation's token lives 30 minutes, and a session on a loaded machine runs
longer than that, so a clock started at the session's start handed a late test
tokens whose TTL had already passed, and the emulator's reaper (every 60 s)
deleted them in the middle of the test.
"""

from __future__ import annotations

from datetime import UTC, datetime

from adapters.system import ManualClock


def real_now() -> datetime:
    """The real current time, to the second."""
    return datetime.now(UTC).replace(microsecond=0)


START = real_now()
"""When the session began: a reference for times a test only compares (a spec's
expiry two days on), never a clock's start."""


class FixedClock(ManualClock):
    """A clock that moves only when a test moves it; starts at ``start`` or at the
    real current time."""

    def __init__(self, start: datetime | None = None) -> None:
        super().__init__(start or real_now())
