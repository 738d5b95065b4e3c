"""The proposal view and the pending-approval inbox: pure folds of a proposal stream.

The proposal view (``GET /proposals/{id}``) shows versions, statuses, hashes,
presentations (ids, status, expiry) and the attempt id: never a token, a token
hash or spec content (I10).

The inbox has one row per proposal lineage, for its current version, listed per
actor and status. A ``presented`` row sorts by the moment the version expires
(``Proposal.expiry_of``), so expiry needs no writer: at read time the rows
before ``now`` are ``expired`` and the rows after it are still ``presented``
(``inbox_bounds``). Every other status sorts by the time it was decided.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from domain.approvals import approval_or_human
from domain.proposal import Proposal, ProposalStatus
from domain.timeutil import is_past, parse_utc
from projections.ports import ViewRecord, ViewStore

INBOX_VIEW = "proposal_inbox"
PROPOSAL_PREFIX = "prop_"
# after every "<time>#prop_..." key of the same instant: '~' sorts after 'p'
_AFTER = "#~"


def sort_time(moment: datetime | str) -> str:
    """A fixed-width, sortable form of a moment (microseconds since the epoch)."""
    at = parse_utc(moment) if isinstance(moment, str) else moment
    return f"{round(at.timestamp() * 1_000_000):018d}"


def approval_of(proposal: Proposal, number: int) -> dict[str, Any] | None:
    """How version ``number`` was approved (design.md 2.7), None unless claimed."""
    record = proposal.versions[number]
    if record["status"] != ProposalStatus.CLAIMED.value:
        return None
    return approval_or_human(record.get("approval"), proposal.actor_id)


def votes_of(proposal: Proposal, number: int) -> list[str]:
    """The quorum members whose votes are recorded for version ``number`` (ids only)."""
    return [vote["actor_id"] for vote in proposal.versions[number].get("votes", [])]


def proposal_view(proposal: Proposal, now: datetime) -> dict[str, Any]:
    """The redacted proposal with statuses as of ``now`` (expiry derived)."""
    versions = [
        {
            "version": number,
            "status": proposal.effective_status(number, now).value,
            "payload_hash": record["payload_hash"],
            "view_hash": record["view_hash"],
            "created_at": record["created_at"],
            "expires_at": proposal.expiry_of(number),
            "attempt_id": record["attempt_id"],
            "approval": approval_of(proposal, number),
            "votes": votes_of(proposal, number),
            "escalated_to": (record.get("escalated") or {}).get("group"),
        }
        for number, record in sorted(proposal.versions.items())
    ]
    presentations = [
        {
            "presentation_id": pid,
            "version": p["version"],
            "status": proposal.presentation_status(pid, now).value,
            "created_at": p["created_at"],
            "expires_at": p["expires_at"],
            "actor_id": p["actor_id"],
        }
        for pid, p in sorted(proposal.presentations.items(), key=lambda kv: kv[1]["created_at"])
    ]
    current = proposal.current_version
    return {
        "proposal_id": proposal.id,
        "actor_id": proposal.actor_id,
        "current_version": current,
        "status": proposal.effective_status(current, now).value,
        "revision": proposal.version,
        "versions": versions,
        "presentations": presentations,
    }


def inbox_list_key(actor_id: str, status: str) -> str:
    """The list partition of one actor's proposals in one stored status."""
    return f"inbox#{actor_id}#{status}"


def inbox_record(proposal: Proposal) -> ViewRecord:
    """The inbox row of a lineage (its current version); time-independent, so a
    replay or a rebuild writes the same row."""
    number = proposal.current_version
    record = proposal.versions[number]
    status = record["status"]
    expires_at = proposal.expiry_of(number)
    active = proposal.active_presentation_ids(number)
    data: dict[str, Any] = {
        "proposal_id": proposal.id,
        "actor_id": proposal.actor_id,
        "version": number,
        "status": status,
        "payload_hash": record["payload_hash"],
        "view_hash": record["view_hash"],
        "created_at": record["created_at"],
        "expires_at": expires_at,
        "presentation_ids": active,
        "attempt_id": record["attempt_id"],
        "approval": approval_of(proposal, number),
        "votes": votes_of(proposal, number),
    }
    if status == ProposalStatus.PRESENTED.value:
        sort_at = expires_at
    else:
        sort_at = record.get("decided_at") or record.get("approved_at") or record["created_at"]
    return ViewRecord(
        name=INBOX_VIEW,
        key=proposal.id,
        version=proposal.version,
        data=data,
        list_pk=inbox_list_key(proposal.actor_id, status),
        list_sk=f"{sort_time(sort_at)}#{proposal.id}",
    )


def inbox_row(data: dict[str, Any] | Any, now: datetime) -> dict[str, Any]:
    """A stored row as the inbox shows it at ``now`` (``expired`` derived)."""
    row = dict(data)
    if row["status"] == ProposalStatus.PRESENTED.value and is_past(row["expires_at"], now):
        row["status"] = ProposalStatus.EXPIRED.value
        row["presentation_ids"] = []
    return row


def inbox_bounds(status: ProposalStatus, now: datetime) -> tuple[str, str | None, str | None]:
    """(stored list status, start cursor, stop key) of a requested status at ``now``.

    ``presented`` reads the presented list after ``now``; ``expired`` reads the
    same list up to ``now``; other statuses read their own list whole. Rows whose
    key is at or past the stop key are not part of the answer."""
    boundary = sort_time(now) + _AFTER
    if status is ProposalStatus.PRESENTED:
        return ProposalStatus.PRESENTED.value, boundary, None
    if status is ProposalStatus.EXPIRED:
        return ProposalStatus.PRESENTED.value, None, boundary
    return status.value, None, None


def list_inbox(
    views: ViewStore,
    actor_id: str,
    status: ProposalStatus,
    now: datetime,
    limit: int,
    cursor: str | None = None,
) -> tuple[Sequence[dict[str, Any]], str | None]:
    """A page of an actor's inbox in one status as of ``now``, and the raw cursor
    of the next page (None when done)."""
    stored, start, stop = inbox_bounds(status, now)
    if start is not None and (cursor is None or cursor < start):
        cursor = start
    rows, next_raw = views.list_views(inbox_list_key(actor_id, stored), limit, cursor)
    if stop is not None and any((r.list_sk or "") >= stop for r in rows):
        rows = [r for r in rows if (r.list_sk or "") < stop]
        next_raw = None
    return [inbox_row(r.data, now) for r in rows], next_raw
