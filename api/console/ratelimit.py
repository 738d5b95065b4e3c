"""A bounded, per-address rate limit for the start of an OpenID Connect sign-in.

``GET /console/oidc/start`` writes a flow item to the store and sends the
browser to the provider, so an unauthenticated client could otherwise make the
ledger write (and the provider answer) as fast as it can ask. Each client
address gets a token bucket of ``capacity`` starts that refills at ``capacity``
per ``window`` seconds; a start with no token left gets one answer, whoever
asks and however often (429, the sign-in page's words, ``Retry-After``).

The buckets live in this process, at most ``max_addresses`` of them: when a new
address arrives with the table full, the address least recently seen is
forgotten (it starts again with a full bucket, which is what it would have had
after a quiet ``window`` anyway). Time comes from the ledger's clock, so tests
move it by hand.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime

MAX_ADDRESSES = 10_000
"""Buckets kept at most (about 100 bytes each: a megabyte)."""


@dataclass
class _Bucket:
    tokens: float
    at: float


class RateLimit:
    """``allow(address, now)``: True and a token taken, or False (none left)."""

    def __init__(
        self, capacity: int, window: float = 60.0, max_addresses: int = MAX_ADDRESSES
    ) -> None:
        if capacity < 1 or window <= 0 or max_addresses < 1:
            raise ValueError("capacity, window and max_addresses must be positive")
        self.capacity = capacity
        self.window = window
        self.max_addresses = max_addresses
        self._rate = capacity / window
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self._lock = threading.Lock()

    def allow(self, address: str, now: datetime) -> bool:
        """Take one token of ``address``'s bucket, if it has one."""
        at = now.timestamp()
        with self._lock:
            bucket = self._buckets.get(address)
            if bucket is None:
                if len(self._buckets) >= self.max_addresses:
                    self._buckets.popitem(last=False)  # the least recently seen
                bucket = self._buckets[address] = _Bucket(float(self.capacity), at)
            else:
                self._buckets.move_to_end(address)
                elapsed = max(0.0, at - bucket.at)  # a clock set back refills nothing
                bucket.tokens = min(float(self.capacity), bucket.tokens + elapsed * self._rate)
                bucket.at = max(bucket.at, at)
            if bucket.tokens < 1.0:
                return False
            bucket.tokens -= 1.0
            return True

    def retry_after(self) -> int:
        """Seconds after which one more start is allowed (whole, at least 1)."""
        return max(1, math.ceil(1.0 / self._rate))

    def __len__(self) -> int:
        with self._lock:
            return len(self._buckets)
