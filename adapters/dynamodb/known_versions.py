"""The view rows whose stored version this process knows, so that a write which
would change nothing is never sent.

A row this process wrote at version v, or saw its version guard refuse at v,
is stored at v or newer from then on: stored versions only grow (no view row
is deleted or put back older; a rebuild replaces a row only at the same
version or newer). A later row of that key at v or below is one the guard
would refuse, so the view store skips it without a request: a stream batch
delivered again, or a stream read again for each record of a batch, writes
nothing twice. The memory is bounded (least recently used keys are
forgotten) and only ever skips; forgetting costs one refused write.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable

from projections.ports import ViewRecord

KNOWN_VERSIONS = 4096  # keys remembered per view store


class KnownVersions:
    """(view name, key) -> a version the stored row is known to have reached."""

    def __init__(self, size: int = KNOWN_VERSIONS) -> None:
        self.size = size
        self._versions: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, rows: Iterable[ViewRecord]) -> None:
        """The store holds each of ``rows`` at its version or newer."""
        with self._lock:
            for row in rows:
                key = (row.name, row.key)
                self._versions[key] = max(row.version, self._versions.get(key, 0))
                self._versions.move_to_end(key)
            while len(self._versions) > self.size:
                self._versions.popitem(last=False)

    def holds(self, row: ViewRecord) -> bool:
        """True when the stored row is known to be at ``row``'s version or newer."""
        with self._lock:
            return self._versions.get((row.name, row.key), 0) >= row.version
