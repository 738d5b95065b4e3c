"""The escalation watch: every presented proposal version, by when it expires.

One row per proposal lineage, in one list while its current version is
presented and has not escalated, sorted by ``Proposal.expiry_of``; out of
every list otherwise. The housekeeping pass reads the stretch from now to now
plus the longest lead time a policy may ask for (``domain.escalation``) and
lets the domain decide each one on a consistent read: a row is a hint, never
the truth, and reading it costs what it returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from domain.escalation import MAX_LEAD
from domain.proposal import Proposal, ProposalStatus
from projections.inbox import sort_time
from projections.ports import ViewRecord, ViewStore

WATCH_VIEW = "escalation_watch"
WATCH_LIST = "escalation#presented"


def watch_record(proposal: Proposal) -> ViewRecord:
    """The watch row of a lineage (time-independent, so a replay writes the same)."""
    number = proposal.current_version
    record = proposal.versions[number]
    expires_at = proposal.expiry_of(number)
    watched = record["status"] == ProposalStatus.PRESENTED.value and "escalated" not in record
    return ViewRecord(
        name=WATCH_VIEW,
        key=proposal.id,
        version=proposal.version,
        data={"proposal_id": proposal.id, "version": number, "expires_at": expires_at},
        list_pk=WATCH_LIST if watched else None,
        list_sk=f"{sort_time(expires_at)}#{proposal.id}" if watched else None,
    )


def due_for_escalation(views: ViewStore, now: datetime, limit: int) -> Sequence[str]:
    """Ids of watched proposals expiring after ``now`` and within ``MAX_LEAD``,
    soonest first, at most ``limit``."""
    rows, _ = views.list_views(
        WATCH_LIST, limit, sort_time(now), until=sort_time(now + MAX_LEAD) + "#~"
    )
    return [str(row.data["proposal_id"]) for row in rows]
