"""One bounded retry for optimistic-concurrency conflicts.

A service step reads the streams it needs, decides, and commits; a
``ConcurrencyConflict`` means another writer appended first, so the step runs
again on fresh reads. The bound keeps a hot stream from spinning a request
forever; what happens when it is exhausted is the caller's decision.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from domain.errors import ConcurrencyConflict

CONFLICT_RETRY_LIMIT = 8
"""How many times one service call runs its read-decide-commit step."""

T = TypeVar("T")


def retry_on_conflict(
    step: Callable[[], T],
    *,
    exhausted: Callable[[], T],
    limit: int = CONFLICT_RETRY_LIMIT,
) -> T:
    """Run ``step`` until it returns without a conflict, at most ``limit`` times.

    ``step`` raises ``ConcurrencyConflict`` to ask for another run; after the
    last one the answer is ``exhausted()`` (which may raise).
    """
    for _ in range(limit):
        try:
            return step()
        except ConcurrencyConflict:
            continue
    return exhausted()
