"""The oracle: I1-I9 checked from the raw store, independently of the aggregates.

The aggregates enforce the state machine; the oracle re-derives it from the
stored events with its own small model, so a rule the aggregate forgot to
enforce shows up as a violation here rather than as silent agreement.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from adapters.store import LedgerStore
from domain.attempt import ExecutionAttempt
from domain.audit import verify_chain
from domain.base import LedgerAggregate, LedgerEvent
from domain.proposal import Proposal
from domain.services.execution import WorkerPolicy
from projections.ports import ViewStore
from projections.status import STATUS_VIEW, status_record
from tests.support.stream_checks import (
    AttemptSummary,
    Violation,
    check_attempt_stream,
    expect,
    state_of,
)
from tests.support.worlds.approval import check_approval_invariants


@dataclass
class StreamRecord:
    """What the oracle last saw of one stream."""

    stored: list[tuple[int, str, bytes]]


class Oracle:
    """Checks the raw store after every step; remembers what it saw (append-only)."""

    def __init__(self, store: LedgerStore, views: ViewStore, policy: WorkerPolicy) -> None:
        self.store = store
        self.views = views
        self.policy = policy
        self.seen: dict[str, StreamRecord] = {}
        self.live: dict[str, dict[str, Any]] = {}
        self.kinds: dict[str, type[LedgerAggregate]] = {}
        self.view_versions: dict[str, int] = {}
        self.summaries: dict[str, AttemptSummary] = {}

    def committed(self, aggregate: LedgerAggregate) -> None:
        """A writer's in-memory aggregate right after its commit succeeded."""
        import copy

        self.live[aggregate.id] = copy.deepcopy(state_of(aggregate))
        self.kinds[aggregate.id] = type(aggregate)

    def check_streams(self, stream_ids: Iterable[str]) -> None:
        """Append-only, hash chain, replay = the writer's state (I9); attempt rules."""
        for stream_id in stream_ids:
            raw = self.store.read_stream(stream_id)
            stored = [(s.originator_version, s.topic, bytes(s.state)) for s in raw]
            before = self.seen.get(stream_id)
            if before is not None:
                expect(
                    stored[: len(before.stored)] == before.stored,
                    f"{stream_id}: a stored event was changed or removed (I9)",
                )
            self.seen[stream_id] = StreamRecord(stored)
            events: list[LedgerEvent] = [
                self.store.mapper.to_domain_event(s)
                for s in raw  # type: ignore[misc]
            ]
            rebuilt: Any = None
            for event in events:
                rebuilt = event.mutate(rebuilt)
            cls = self.kinds[stream_id]
            expect(isinstance(rebuilt, cls), f"{stream_id}: stream vanished or changed kind")
            expect(
                state_of(rebuilt) == self.live[stream_id],
                f"{stream_id}: replay differs from the state its last writer held (I9)",
            )
            check = verify_chain(stream_id, events, (len(events), rebuilt.chain_head))
            expect(
                check.ok,
                f"{stream_id}: hash chain broken at {check.first_bad_version} ({check.reason})",
            )
            if cls is ExecutionAttempt:
                self.summaries[stream_id] = check_attempt_stream(stream_id, events, self.policy)

    def check_proposals(self, proposal_ids: list[str], now: datetime) -> None:
        """I1-I3 from the raw store."""
        try:
            check_approval_invariants(self.store, proposal_ids, now)
        except AssertionError as exc:
            raise Violation(f"I1-I3: {exc}") from exc

    def check_due(self, attempt_ids: Iterable[str], horizon: datetime) -> None:
        """The due-work index says exactly when each attempt needs recovery next."""
        due = self.all_due(horizon)
        for attempt_id in attempt_ids:
            summary = self.summaries[attempt_id]
            expected = summary.next_action_at()
            found = due.get(attempt_id)
            later = summary.due_may_wait_until()
            if later is not None and _millis(found) == _millis(later):
                continue
            expect(
                _millis(found) == _millis(expected),
                f"{attempt_id}: due entry {found} but the attempt says {expected} "
                f"({summary.status})",
            )

    def all_due(self, horizon: datetime) -> dict[str, datetime]:
        found: dict[str, datetime] = {}
        cursor: str | None = None
        for _ in range(1000):
            page = self.store.due_work(horizon, 500, cursor)
            for item in page.items:
                if item.next_action_at is not None:
                    found[item.attempt_id] = item.next_action_at
            if page.cursor is None:
                return found
            cursor = page.cursor
        raise Violation("due-work paging did not end")

    def check_views(self, attempt_ids: Iterable[str], *, exact: bool = False) -> None:
        """A view never regresses, never runs ahead of its stream, and equals the fold
        of the stream at the version it names (``exact``: at the stream's head)."""
        for attempt_id in attempt_ids:
            view = self.views.get_view(STATUS_VIEW, attempt_id)
            attempt = self.store.get(ExecutionAttempt, attempt_id)
            assert attempt is not None
            if view is None:
                expect(not exact, f"{attempt_id}: no status view after projection")
                continue
            previous = self.view_versions.get(attempt_id, 0)
            expect(view.version >= previous, f"{attempt_id}: status view regressed")
            expect(view.version <= attempt.version, f"{attempt_id}: view ahead of its stream")
            self.view_versions[attempt_id] = view.version
            if exact or view.version == attempt.version:
                expect(view.version == attempt.version, f"{attempt_id}: view is stale")
                expect(
                    dict(view.data) == dict(status_record(attempt).data),
                    f"{attempt_id}: view differs from the replayed stream",
                )

    def proposal_of(self, attempt_id: str) -> Proposal | None:
        summary = self.store.get(ExecutionAttempt, attempt_id)
        return None if summary is None else self.store.get(Proposal, summary.proposal_id)


def _millis(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1000)
