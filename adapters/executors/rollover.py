"""What switching to a set of executors would do to the work already bound to builds.

``ledger executors check`` builds the registry from the settings exactly as
start-up does, then compares it with the directory (is each build registered,
available, with the same delivery mode?) and with the pending work: attempts
that are queued or executing, and the open presentations of presented
proposals. Each is bound to one (capability, build) for good. A build that
pending work names and these executors do not host is *dropped*: its attempts
would wait (``waiting_for_build``) until some worker hosts it again or the
directory withdraws it (docs/operations.md).

Everything is read through indexes, never a table scan: the due-work index
(every attempt that is not settled has an entry, written with the transition),
then each pending attempt's stream; the head index for the actors (their
directory records sort first, ``actor:``), and each actor's inbox list of
presented proposals, then each such proposal's stream. Presentations are seen
as the inbox projection shows them, so one made in the last moment may be
missing; attempts come from the index written in the same commit.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from adapters.executors.registry import RegistryEntry
from adapters.store import LedgerStore
from domain.attempt import AttemptStatus, ExecutionAttempt
from domain.directory import DirectoryRecord, executor_build_record_id
from domain.proposal import PresentationStatus, Proposal, ProposalStatus
from projections.inbox import list_inbox
from projections.ports import ViewStore

Build = tuple[str, str]
"""(capability, build digest)"""
ACTOR_PREFIX = "actor:"
PAGE = 200
EVERYTHING = timedelta(days=365 * 200)  # a due-work bound past every entry


@dataclass
class Bound:
    """The pending work bound to one build."""

    queued: int = 0
    executing: int = 0
    presentations: int = 0

    @property
    def total(self) -> int:
        return self.queued + self.executing + self.presentations

    def describe(self) -> str:
        parts = [
            _count(self.queued, "queued attempt"),
            _count(self.executing, "executing attempt"),
            _count(self.presentations, "open presentation"),
        ]
        shown = [p for p in parts if p]
        if not shown:
            return "no pending work"
        return ", ".join(shown[:-1]) + (" and " if len(shown) > 1 else "") + shown[-1]


def _count(number: int, noun: str) -> str:
    return "" if number == 0 else f"{number} {noun}{'' if number == 1 else 's'}"


@dataclass(frozen=True)
class DirectoryState:
    """What the directory says of one build (None: no record)."""

    available: bool
    delivery_mode: str


@dataclass
class RolloverReport:
    """The executors, the directory and the pending work, side by side."""

    hosted: list[RegistryEntry]
    directory: dict[Build, DirectoryState | None]
    pending: dict[Build, Bound] = field(default_factory=dict)

    @property
    def dropped(self) -> list[tuple[Build, Bound]]:
        """Builds that pending work is bound to and these executors do not host."""
        hosted = {(e.capability, e.build_digest) for e in self.hosted}
        return sorted((b, w) for b, w in self.pending.items() if b not in hosted and w.total)

    @property
    def mismatched(self) -> list[RegistryEntry]:
        """Hosted builds whose directory record names another delivery mode: the
        pre-dispatch recheck fails their attempts safe (``delivery_mode_mismatch``)."""
        return [
            e
            for e in self.hosted
            if (state := self.directory.get((e.capability, e.build_digest))) is not None
            and state.delivery_mode != e.delivery_mode.value
        ]

    def lines(self) -> list[str]:
        """One line per hosted build, then one per dropped build."""
        out = []
        for entry in self.hosted:
            build = (entry.capability, entry.build_digest)
            state = self.directory.get(build)
            if state is None:
                where = (
                    "not in the directory: register it before a proposal names it "
                    f"(PUT /directory/executor-builds/{entry.capability}/{entry.build_digest})"
                )
            elif state.delivery_mode != entry.delivery_mode.value:
                where = (
                    f"the directory says {state.delivery_mode}, this build is "
                    f"{entry.delivery_mode.value}: its attempts would fail safe"
                )
            else:
                where = "available in the directory" if state.available else "withdrawn"
            bound = self.pending.get(build, Bound())
            out.append(
                f"{entry.capability} {entry.build_digest} {entry.state}: {where}; "
                f"{bound.describe()}"
            )
        for (capability, digest), bound in self.dropped:
            out.append(
                f"{bound.describe()} {'is' if bound.total == 1 else 'are'} bound to "
                f"{capability} {digest}, which this file drops"
            )
        return out


def compare(
    entries: Iterable[RegistryEntry], store: LedgerStore, views: ViewStore, now: datetime
) -> RolloverReport:
    """The report for ``entries`` (a registry's) against the store as it is now."""
    hosted = sorted(entries, key=lambda e: (e.capability, e.build_digest))
    pending = pending_work(store, views, now)
    builds = {(e.capability, e.build_digest) for e in hosted} | set(pending)
    return RolloverReport(hosted, {b: directory_state(store, b) for b in sorted(builds)}, pending)


def directory_state(store: LedgerStore, build: Build) -> DirectoryState | None:
    record = store.get(DirectoryRecord, executor_build_record_id(*build))
    if record is None:
        return None
    return DirectoryState(record.flag("available"), str(record.values.get("delivery_mode", "")))


def pending_work(store: LedgerStore, views: ViewStore, now: datetime) -> dict[Build, Bound]:
    """Queued and executing attempts, and open presentations, by build."""
    found: dict[Build, Bound] = {}
    for attempt in _pending_attempts(store, now):
        bound = found.setdefault((attempt.capability, attempt.executor_build), Bound())
        if attempt.status is AttemptStatus.QUEUED:
            bound.queued += 1
        else:
            bound.executing += 1
    for build, controls in _open_presentations(store, views, now):
        found.setdefault(build, Bound()).presentations += controls
    return found


def _pending_attempts(store: LedgerStore, now: datetime) -> Iterator[ExecutionAttempt]:
    cursor: str | None = None
    while True:
        page = store.due_work(now + EVERYTHING, PAGE, cursor)
        for item in page.items:
            attempt = store.get(ExecutionAttempt, item.attempt_id)
            if attempt is not None and attempt.status in (
                AttemptStatus.QUEUED,
                AttemptStatus.EXECUTING,
            ):
                yield attempt  # anything else is a stale entry recovery drops
        if page.cursor is None:
            return
        cursor = page.cursor


def _actors(store: LedgerStore) -> Iterator[str]:
    """Actor ids from the head index: their records sort before every other stream."""
    for head in store.stream_heads():
        if head.stream_id.startswith(ACTOR_PREFIX):
            yield head.stream_id[len(ACTOR_PREFIX) :]
        elif head.stream_id > ACTOR_PREFIX:
            return


def _open_presentations(
    store: LedgerStore, views: ViewStore, now: datetime
) -> Iterator[tuple[Build, int]]:
    for actor_id in _actors(store):
        cursor: str | None = None
        while True:
            rows, cursor = list_inbox(views, actor_id, ProposalStatus.PRESENTED, now, PAGE, cursor)
            for row in rows:
                counted = _presentations_of(store, row, now)
                if counted is not None:
                    yield counted
            if cursor is None:
                break


def _presentations_of(store: LedgerStore, row: Any, now: datetime) -> tuple[Build, int] | None:
    if not row.get("presentation_ids"):
        return None
    proposal = store.get(Proposal, row["proposal_id"])
    if proposal is None:
        return None
    number = proposal.current_version
    record = proposal.versions[number]
    if record["status"] != ProposalStatus.PRESENTED.value:
        return None  # decided since the inbox row was written
    live = [
        pid
        for pid in proposal.active_presentation_ids(number)
        if proposal.presentation_status(pid, now) is PresentationStatus.ACTIVE
    ]
    if not live:
        return None
    spec = record["spec"]
    return (str(spec["capability"]), str(spec["executor_build"])), len(live)
