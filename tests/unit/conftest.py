"""Unit-test fixtures: the replay check runs after every test that tracks aggregates."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.replay import Replay


@pytest.fixture
def replay() -> Iterator[Replay]:
    """Track aggregates with ``replay.track(...)``; they must replay equal at the end (I9)."""
    tracker = Replay()
    yield tracker
    tracker.check()
