"""The projector: applies events to views idempotently, never trusting one record.

Given a hint that a stream changed (a notification, a stream record), it
re-reads that stream with a consistent read, folds it, and writes the view
tagged with the stream version. A redelivered or reordered hint can never
regress a view (the store refuses older versions), and a gap heals itself
because the whole stream is read.

Attempt streams feed the status view and its find index
(``projections.find``), folded from the events' data by the one
fold every status row comes from (``projections.status_fold``, which the
rebuild uses too); proposal streams feed the inbox (``projections.inbox``), the
quorum members' ballots (``projections.ballots``) and the escalation watch
(``projections.escalation_watch``).

As a subscriber of the log (``apply``) it writes the folded rows and the
position it has processed in one atomic write, so a restart resumes from
exactly what the views reflect.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from domain.ports import EventStore
from domain.proposal import Proposal
from domain.spec import ATTEMPT_ID_PREFIX
from projections.ballots import ballot_records
from projections.escalation_watch import watch_record
from projections.find import read_rows
from projections.inbox import PROPOSAL_PREFIX, inbox_record
from projections.ports import LogBatch, TrackedViewStore, ViewRecord
from projections.status import STATUS_VIEW

STATUS_SUBSCRIBER = "status"


@dataclass
class Projector:
    """Keeps the status view (and with it the status lists) up to date."""

    store: EventStore
    views: TrackedViewStore
    name: str = STATUS_SUBSCRIBER

    def project_attempt(self, attempt_id: str) -> bool:
        """Re-fold one attempt stream into its view and its find rows; True
        when the view moved."""
        rows = read_rows(self.store, attempt_id)
        if not rows:
            return False
        # The status row's own guarded put says whether the view moved; the find
        # rows follow it every time, so a crash between the two heals on the
        # hint's retry (and the log's subscriber writes both with its position).
        moved = self.views.put_view(rows[0])
        self.views.put_views(rows[1:], ())
        return moved

    def project_proposal(self, proposal_id: str) -> bool:
        """Re-fold one proposal stream into its inbox row; True when the row moved."""
        proposal = self.store.get(Proposal, proposal_id)
        if proposal is None:
            return False
        self.views.put_views([watch_record(proposal), *ballot_records(proposal)], ())
        return self.views.put_view(inbox_record(proposal))

    def current_view(self, attempt_id: str) -> ViewRecord | None:
        """The stored view, or (when none is stored yet) the fold of the log,
        which is also written. Never None for an attempt that exists: a writer
        that stored the same version first makes ``put_view`` answer False, and
        the stored row (or the fold itself) is the answer then."""
        view = self.views.get_view(STATUS_VIEW, attempt_id)
        if view is not None:
            return view
        rows = read_rows(self.store, attempt_id)
        if not rows:
            return None
        self.views.put_views(rows, ())
        return self.views.get_view(STATUS_VIEW, attempt_id) or rows[0]

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

    def apply(self, batch: LogBatch) -> int:
        """Fold every attempt stream (status) and proposal stream (inbox) of the
        batch; write the rows and the batch's positions atomically (``Subscriber``)."""
        records: list[ViewRecord] = []
        for stream_id in dict.fromkeys(batch.stream_ids):
            if stream_id.startswith(ATTEMPT_ID_PREFIX):
                records += read_rows(self.store, stream_id)
            elif stream_id.startswith(PROPOSAL_PREFIX):
                proposal = self.store.get(Proposal, stream_id)
                if proposal is not None:
                    records += [inbox_record(proposal), watch_record(proposal)]
                    records += ballot_records(proposal)
        return self.views.put_views(records, batch.tracking)
