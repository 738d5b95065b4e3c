"""The projector: applies events to views idempotently, never trusting one record.

Given a hint that a stream changed (a notification, a stream record), it
re-reads that stream with a consistent read, folds it, and writes the view
tagged with the stream version. A redelivered or reordered hint can never
regress a view (the store refuses older versions), and a gap heals itself
because the whole stream is read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from domain.attempt import ExecutionAttempt
from domain.ports import EventStore
from domain.spec import ATTEMPT_ID_PREFIX
from projections.ports import ViewStore
from projections.status import status_record


@dataclass
class Projector:
    """Keeps the status view (and with it the status lists) up to date."""

    store: EventStore
    views: ViewStore

    def project_attempt(self, attempt_id: str) -> bool:
        """Re-fold one attempt stream into its view; True when the view moved."""
        attempt = self.store.get(ExecutionAttempt, attempt_id)
        if attempt is None:
            return False
        return self.views.put_view(status_record(attempt))

    def project_streams(self, stream_ids: Iterable[str]) -> int:
        """Project every attempt stream named (once each); returns views moved."""
        moved = 0
        for stream_id in dict.fromkeys(stream_ids):
            if stream_id.startswith(ATTEMPT_ID_PREFIX) and self.project_attempt(stream_id):
                moved += 1
        return moved
