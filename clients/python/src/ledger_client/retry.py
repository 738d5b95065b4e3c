"""When a request is sent again, and after how long.

A request is retried only when sending it again cannot make a second effect:

- the connection failed before the request was sent (refused, DNS, pool
  timeout): any request;
- the answer was lost after the request went out (reset, timeout, a closed
  connection): reads, directory puts, and POSTs the server deduplicates, by
  their ``Idempotency-Key`` (propose, present, cancel: the retry carries the
  same key and gets the first answer) or by design (an approval or decline of a
  consumed presentation, a repeated reconcile or resolve answers the stored
  truth);
- ``503`` and ``429`` (the server did nothing and says when to come back,
  ``Retry-After`` honoured), and ``409 idempotency_key_in_use`` (the first
  request with the key is still running).

Every retry waits: ``Retry-After`` when the server sent one (never less), else
exponential backoff with full jitter. Both ``max_attempts`` and
``max_elapsed`` bound the whole call; a ``Retry-After`` that would end past
``max_elapsed`` (or is longer than ``max_retry_after``) is not waited for: the
last error is raised at once.
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

RETRY_STATUSES = frozenset({429, 503})
RETRY_CODES = frozenset({"idempotency_key_in_use"})


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long one logical call may try (``max_attempts=1``: never again)."""

    max_attempts: int = 5
    max_elapsed: float = 30.0
    """Seconds from the first try after which nothing is sent again."""
    base_delay: float = 0.2
    max_delay: float = 5.0
    max_retry_after: float = 30.0
    """A longer ``Retry-After`` is not waited for (never shortened: the call fails at once)."""
    random: Callable[[], float] = field(default=random.random, repr=False, compare=False)
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.max_elapsed < 0 or self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("delays must not be negative")

    def backoff(self, retry: int) -> float:
        """Full jitter: uniform in [0, min(max_delay, base_delay * 2**retry)]."""
        ceiling = min(self.max_delay, self.base_delay * (2.0**retry))
        return float(self.random()) * ceiling


def retry_after_seconds(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """``Retry-After`` in seconds (delta-seconds or an HTTP date); None if absent or unreadable."""
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


class Budget:
    """The tries of one logical call: counts them and says how long to wait before the next."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.started = policy.clock()
        self.tries = 0

    def next_delay(self, retry_after: float | None) -> float | None:
        """Seconds to wait before trying again, or None: give up now."""
        self.tries += 1
        if self.tries >= self.policy.max_attempts:
            return None
        if retry_after is not None:
            if retry_after > self.policy.max_retry_after:
                return None
            delay = retry_after
        else:
            delay = self.policy.backoff(self.tries - 1)
        elapsed = self.policy.clock() - self.started
        if elapsed + delay > self.policy.max_elapsed or math.isnan(delay):
            return None
        return delay
