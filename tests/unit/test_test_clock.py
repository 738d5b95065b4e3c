"""The test clock starts at the real time it is made: a token minted late in a
long session must not carry a TTL that the emulator's reaper finds already past."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.support import clocks
from tests.support.clocks import FixedClock


def test_a_clock_starts_at_the_real_time_it_is_made_not_at_the_sessions_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(clocks, "START", datetime(2000, 1, 1, tzinfo=UTC))  # a long session
    started = FixedClock().now()
    assert abs(started - datetime.now(UTC)) < timedelta(seconds=5)
    assert started.microsecond == 0


def test_a_clock_given_a_start_starts_there() -> None:
    start = datetime(2026, 5, 1, 9, 30, tzinfo=UTC)
    assert FixedClock(start).now() == start
