"""Finding attempts for admins: the attention lists and the search, both read
from the find index (``projections.find``), one list at a time, never a scan.

A search reads the one list its most selective filter names (a capability,
else an actor, else a status, else every attempt), newest first, bounded by
the time range as a range of keys, and keeps the rows that match the other
filters; it reads at most ``MAX_READ`` rows per page and answers with a cursor
where it stopped, so a rare combination costs pages, never the table. An id
prefix (``att_...`` or ``prop_...``, at least ``MIN_PREFIX`` characters) is a
range of the list of ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from adapters.bootstrap import Ledger
from api.service.cursors import decode_cursor, encode_cursor, page_size
from api.service.principal import Principal, Role, require_role
from domain.attempt import AttemptStatus
from domain.errors import InvalidInput
from domain.spec import ATTEMPT_ID_PREFIX
from domain.timeutil import parse_utc
from projections.attention import AttentionReason, waiting_for_build
from projections.find import FIND_VIEW, ID_END, newest_first_key
from projections.inbox import PROPOSAL_PREFIX
from projections.ports import ViewRecord

MAX_READ = 500
MIN_PREFIX = 6
ATTENTION = (
    AttemptStatus.OUTCOME_UNKNOWN.value,
    AttemptStatus.EFFECT_AFTER_NO_EFFECT.value,
    AttemptStatus.FAILED_SAFE.value,
)


@dataclass(frozen=True)
class Query:
    """A search: every filter optional, every filter given must hold (with
    ``id_prefix`` the id list is read and the other filters applied to its rows)."""

    status: AttemptStatus | None = None
    capability: str | None = None
    actor_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    id_prefix: str | None = None


def _rows(page: Any) -> list[dict[str, Any]]:
    return [dict(row.data) for row in page]


def attention(
    ledger: Ledger, principal: Principal, reason: str, limit: int, cursor: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    """A page of one attention list (oldest change first), with what each attempt was."""
    require_role(principal, Role.ADMIN)
    if reason == AttentionReason.WAITING_FOR_BUILD.value:
        rows, next_raw = waiting_for_build(
            ledger.views,
            ledger.clock.now(),
            ledger.settings.waiting_for_build_seconds,
            page_size(limit),
            decode_cursor(cursor),
        )
        return _with_facts(ledger, rows), encode_cursor(next_raw)
    if reason not in ATTENTION:
        raise InvalidInput.at("/reason", "not an attention list", "query")
    page, next_raw = ledger.views.list_views(
        f"attention#{reason}", page_size(limit), decode_cursor(cursor)
    )
    return _rows(page), encode_cursor(next_raw)


def _with_facts(ledger: Ledger, rows: Any) -> list[dict[str, Any]]:
    """Status rows with their find rows' facts (one batched read)."""
    found = ledger.views.get_views(FIND_VIEW, [f"{row.key}#all" for row in rows])
    return [{**dict(row.data), **dict(_data(found.get(f"{row.key}#all")))} for row in rows]


def _data(record: ViewRecord | None) -> dict[str, Any]:
    return {} if record is None else dict(record.data)


def _prefix_range(prefix: str) -> tuple[str, str]:
    """The keys strictly after the first and not after the second are the ids
    that start with ``prefix``."""
    before = prefix[:-1] + chr(ord(prefix[-1]) - 1) + ID_END
    return before, prefix + ID_END


def _plan(query: Query) -> tuple[str, str | None, str | None]:
    """The list to read, where to start and where to stop."""
    start: str | None
    stop: str | None
    if query.id_prefix is not None:
        prefix = query.id_prefix
        if len(prefix) < MIN_PREFIX or not prefix.startswith((ATTEMPT_ID_PREFIX, PROPOSAL_PREFIX)):
            raise InvalidInput.at(
                "/id",
                f"an attempt (att_...) or proposal (prop_...) id, at least {MIN_PREFIX} characters",
                "query",
            )
        start, stop = _prefix_range(prefix)
        return ("find#id" if prefix.startswith(ATTEMPT_ID_PREFIX) else "find#proposal"), start, stop
    if query.capability:
        list_pk = f"find#capability#{query.capability}"
    elif query.actor_id:
        list_pk = f"find#actor#{query.actor_id}"
    elif query.status is not None:
        list_pk = f"find#status#{query.status.value}"
    else:
        list_pk = "find#all"
    start = None if query.until is None else newest_first_key(query.until)
    stop = None if query.since is None else newest_first_key(query.since) + "#" + ID_END
    return list_pk, start, stop


def _matches(query: Query, data: dict[str, Any]) -> bool:
    """Every filter given holds for the row. The list read already bounds the
    time range, except the id lists (ordered by id), where it is checked here."""
    if query.id_prefix is not None and (query.since is not None or query.until is not None):
        created = data.get("created_at")
        if created is None:
            return False
        moment = parse_utc(str(created))
        if (query.since is not None and moment < query.since) or (
            query.until is not None and moment > query.until
        ):
            return False
    return (
        (query.status is None or data.get("status") == query.status.value)
        and (not query.capability or data.get("capability") == query.capability)
        and (not query.actor_id or data.get("actor_id") == query.actor_id)
    )


def search(
    ledger: Ledger, principal: Principal, query: Query, limit: int, cursor: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    """A page of the attempts that match, newest first (by id for an id prefix),
    and the cursor of the next page (None at the end). Admins only."""
    require_role(principal, Role.ADMIN)
    if query.since and query.until and query.since > query.until:
        raise InvalidInput.at("/since", "must not be after until", "query")
    list_pk, start, stop = _plan(query)
    after: str | None = decode_cursor(cursor) or start
    wanted, read = page_size(limit), 0
    found: list[dict[str, Any]] = []
    while read < MAX_READ:
        page, next_raw = ledger.views.list_views(list_pk, min(wanted, MAX_READ), after, until=stop)
        read += len(page)
        for row in page:
            after = row.list_sk
            if _matches(query, dict(row.data)):
                found.append(dict(row.data))
                if len(found) == wanted:
                    return found, encode_cursor(after) if (
                        next_raw or row is not page[-1]
                    ) else None
        if next_raw is None:
            return found, None
    return found, encode_cursor(after)
