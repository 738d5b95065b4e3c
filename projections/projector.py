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
        # The status row and its find rows share its version: one guarded write
        # moves them together (a row the store holds at that version is dropped).
        return self.views.put_views(read_rows(self.store, attempt_id), ()) > 0

    def project_proposal(self, proposal_id: str) -> bool:
        """Re-fold one proposal stream into its inbox row, its escalation watch
        and its members' ballot rows; True when a row moved."""
        return self.views.put_views(self.rows_of(proposal_id), ()) > 0

    def rows_of(self, stream_id: str) -> list[ViewRecord]:
        """The rows one stream folds into (one consistent read): an attempt's status
        row and find rows, a proposal's inbox row, escalation watch and ballot
        rows; none for an empty stream or a stream of anything else."""
        if stream_id.startswith(ATTEMPT_ID_PREFIX):
            return read_rows(self.store, stream_id)
        if stream_id.startswith(PROPOSAL_PREFIX):
            proposal = self.store.get(Proposal, stream_id)
            if proposal is not None:
                return [inbox_record(proposal), watch_record(proposal), *ballot_records(proposal)]
        return []

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
        """Project every attempt and proposal stream named: one read per stream
        and the rows of them all written together (guarded writes of up to 100
        rows each); returns rows moved."""
        rows = [row for stream_id in dict.fromkeys(stream_ids) for row in self.rows_of(stream_id)]
        return self.views.put_views(rows, ())

    def apply(self, batch: LogBatch) -> int:
        """Fold every attempt stream (status) and proposal stream (inbox) of the
        batch; write the rows and the batch's positions atomically (``Subscriber``)."""
        records = [
            row for stream_id in dict.fromkeys(batch.stream_ids) for row in self.rows_of(stream_id)
        ]
        return self.views.put_views(records, batch.tracking)
