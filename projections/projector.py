"""The projector: applies events to views idempotently, never trusting one record.

Given a hint that a stream changed (a notification, a stream record), it
re-reads that stream with a consistent read, folds it, and writes the view
tagged with the stream version. A redelivered or reordered hint can never
regress a view (the store refuses older versions), and a gap heals itself
because the whole stream is read.

Attempt streams feed the status view; proposal streams feed the inbox
(``projections.inbox``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from domain.attempt import ExecutionAttempt
from domain.ports import EventStore
from domain.proposal import Proposal
from domain.spec import ATTEMPT_ID_PREFIX
from projections.inbox import PROPOSAL_PREFIX, inbox_record
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

    def project_proposal(self, proposal_id: str) -> bool:
        """Re-fold one proposal stream into its inbox row; True when the row moved."""
        proposal = self.store.get(Proposal, proposal_id)
        if proposal is None:
            return False
        return self.views.put_view(inbox_record(proposal))

    def project_streams(self, stream_ids: Iterable[str]) -> int:
        """Project every attempt and proposal stream named (once each); returns
        views moved."""
        moved = 0
        for stream_id in dict.fromkeys(stream_ids):
            if stream_id.startswith(ATTEMPT_ID_PREFIX):
                moved += self.project_attempt(stream_id)
            elif stream_id.startswith(PROPOSAL_PREFIX):
                moved += self.project_proposal(stream_id)
        return moved
