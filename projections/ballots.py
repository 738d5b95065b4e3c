"""Ballots: the proposals waiting for one quorum member's vote, a pure fold of a
proposal stream.

A quorum (or an escalated version's fallback group) decides through members'
own presentations (docs/policies.md), so a member's work is not in the inbox
of the proposal's actor. Every member ever presented a lineage has one row,
keyed ``<proposal id>#<member>``, in the list ``ballots#<member>`` while the
member's vote is wanted: the current version is presented, the member holds
an active presentation of it and has not voted on it. Otherwise the row is in
no list. It sorts by when the member's presentation (or the version) expires,
so, as in the inbox, the rows before ``now`` are expired at read time with no
writer (``list_ballots`` starts at ``now``).

Ids, times and counts only (I10): no token, no token hash, no content.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from domain.proposal import Proposal, ProposalStatus
from domain.timeutil import format_utc, parse_utc
from projections.inbox import sort_time
from projections.ports import ViewRecord, ViewStore

BALLOT_VIEW = "member_ballot"
_AFTER = "#~"  # after every "<time>#prop_..." key of the same instant


def ballot_list_key(member: str) -> str:
    """The list of the proposals waiting for ``member``'s vote."""
    return f"ballots#{member}"


def votes_with_times(proposal: Proposal, number: int) -> list[dict[str, Any]]:
    """The recorded votes of version ``number``: who and when, oldest first."""
    return [
        {"actor_id": vote["actor_id"], "at": vote.get("at")}
        for vote in proposal.versions[number].get("votes", [])
    ]


def waiting_on(proposal: Proposal, number: int) -> list[str]:
    """The members presented version ``number`` whose vote is still open: an
    active presentation and no recorded vote (the proposal's actor excluded)."""
    voted = {vote["actor_id"] for vote in proposal.versions[number].get("votes", [])}
    members = {
        proposal.presentations[pid]["actor_id"] for pid in proposal.active_presentation_ids(number)
    }
    return sorted(m for m in members - voted if m != proposal.actor_id)


def ballot_records(proposal: Proposal) -> list[ViewRecord]:
    """One row per member ever presented this lineage (time-independent, so a
    replay or a rebuild writes the same rows)."""
    number = proposal.current_version
    record = proposal.versions[number]
    presented = record["status"] == ProposalStatus.PRESENTED.value
    open_members = set(waiting_on(proposal, number)) if presented else set()
    deadline = parse_utc(record["spec"]["expires_at"])
    members = sorted({p["actor_id"] for p in proposal.presentations.values()} - {proposal.actor_id})
    escalated = record.get("escalated") or {}
    rows = []
    for member in members:
        mine = [
            parse_utc(proposal.presentations[pid]["expires_at"])
            for pid in proposal.active_presentation_ids(number)
            if proposal.presentations[pid]["actor_id"] == member
        ]
        expires = min(max(mine), deadline) if mine else deadline
        listed = member in open_members
        rows.append(
            ViewRecord(
                name=BALLOT_VIEW,
                key=f"{proposal.id}#{member}",
                version=proposal.version,
                data={
                    "proposal_id": proposal.id,
                    "member": member,
                    "actor_id": proposal.actor_id,
                    "version": number,
                    "status": record["status"],
                    "created_at": record["created_at"],
                    "expires_at": format_utc(expires),
                    "votes": votes_with_times(proposal, number),
                    "waiting_on": sorted(open_members),
                    "escalated_to": escalated.get("group"),
                },
                list_pk=ballot_list_key(member) if listed else None,
                list_sk=f"{sort_time(expires)}#{proposal.id}" if listed else None,
            )
        )
    return rows


def list_ballots(
    views: ViewStore, member: str, now: datetime, limit: int, cursor: str | None = None
) -> tuple[Sequence[dict[str, Any]], str | None]:
    """A page of what waits for ``member``'s vote as of ``now``, soonest expiry
    first, and the raw cursor of the next page (None when done)."""
    start = sort_time(now) + _AFTER
    if cursor is None or cursor < start:
        cursor = start
    rows, next_raw = views.list_views(ballot_list_key(member), limit, cursor)
    return [dict(row.data) for row in rows], next_raw
