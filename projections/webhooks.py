"""Webhook deliveries: one tracked subscriber of the log per subscription (design.md 5.10).

For every stream a batch touched, the notifier folds the stream event by event
and finds the notifications it implies (``domain.notifications``): an attempt
reaching ``succeeded``, ``failed_safe``, ``outcome_unknown``,
``manually_resolved`` or ``effect_after_no_effect`` (an effect seen after a "no
effect" settlement, by a late answer or by the watch of I12); a proposal
version ``declined`` or ``expired``. Each one the subscription asks for
becomes a **delivery record** (a view row keyed by a
deterministic delivery id), written with the batch's position in one atomic
write. A record that already exists is never rewritten by the notifier (the
version guard refuses version 1 over anything), so a replay after a crash adds
nothing and loses nothing.

The deliverer (``adapters.webhooks.deliverer``) moves a record through
``pending`` -> ``delivered`` or ``failing`` (and back, on a retry or a
redeliver) with a version one above the stored row: the same guard makes each
move a compare-and-set.

An outstanding record is listed by subscription and next-try time (the due
lists ``webhook-due#pending`` and ``webhook-due#failing``, sort key
``<subscription>#<next try>#<delivery id>``), so a delivery pass of one
subscription reads only what is due for it (``due``), however large the
backlog; a delivered one is listed by the time of its fact. Each record names
the delivery of the subject's previous fact for the same subscription
(``after``): the deliverer sends it only once that one is acknowledged, which
keeps the order per attempt or proposal without reading the subject's other
records.

A record holds the body to send: the redacted status view (attempts) or the
redacted proposal view (proposals) as of the fact, never a token, spec content
or an idempotency key (the views hold none).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from domain.base import LedgerEvent
from domain.notifications import (
    Notification,
    NotificationType,
    attempt_notification,
    proposal_notifications,
)
from domain.ports import EventStore
from domain.proposal import Proposal, ProposalStatus
from domain.spec import ATTEMPT_ID_PREFIX
from domain.timeutil import format_utc, parse_utc
from projections.delivery_status import DeliveryStatus as DeliveryStatus
from projections.inbox import PROPOSAL_PREFIX, proposal_view, sort_time
from projections.ports import LogBatch, TrackedViewStore, ViewRecord, ViewStore
from projections.status import view_of
from projections.status_fold import fold_fields, typed

DELIVERY_VIEW = "webhook_delivery"
EXPIRY_WATCH_VIEW = "webhook_expiry"
START_VIEW = "webhook_start"  # when a ``start = "now"`` subscription first ran
DELIVERY_ID_PREFIX = "whd_"
# what the admin list shows (the body is sent, not listed)
LISTED_FIELDS = (
    "delivery_id",
    "subscription_id",
    "notification_id",
    "type",
    "subject_id",
    "subject_version",
    "status",
    "attempts",
    "next_try_at",
    "last_error",
    "response_status",
    "created_at",
    "updated_at",
    "delivered_at",
)


OUTSTANDING = (DeliveryStatus.PENDING, DeliveryStatus.FAILING)
_OUTSTANDING_VALUES = frozenset(status.value for status in OUTSTANDING)
LEGACY_LIST_KEYS = ("webhook#pending", "webhook#failing")
"""Where outstanding records were listed before the due lists (by the time of
their fact): the deliverer moves what it finds there (``adopt_legacy``)."""


def delivery_id(subscription_id: str, notification_id: str) -> str:
    """Deterministic: one delivery per notification and subscription."""
    digest = hashlib.sha256(f"{subscription_id}\n{notification_id}".encode())
    return DELIVERY_ID_PREFIX + digest.hexdigest()[:32]


def delivery_list_key(status: str) -> str:
    """The list that holds the records of one status: the due lists for the
    outstanding ones, ``webhook#delivered`` for the rest."""
    if status in _OUTSTANDING_VALUES:
        return f"webhook-due#{status}"
    return f"webhook#{status}"


def due_sort_key(subscription_id: str, next_try_at: str, delivery: str) -> str:
    """A due list's order: by subscription (ids hold no ``#``), then next try."""
    return f"{subscription_id}#{sort_time(next_try_at)}#{delivery}"


def watch_list_key(subscription_id: str) -> str:
    """Presented proposal versions a subscription waits to see expire, by expiry."""
    return f"webhook-expiry#{subscription_id}"


def delivery_row(data: Mapping[str, Any], version: int) -> ViewRecord:
    """A delivery record as stored: an outstanding one in its status's due list
    (by subscription and next try), a delivered one in order of the fact."""
    status = data["status"]
    if status in _OUTSTANDING_VALUES:
        sort_key = due_sort_key(data["subscription_id"], data["next_try_at"], data["delivery_id"])
    else:
        sort_key = f"{sort_time(data['created_at'])}#{data['delivery_id']}"
    return ViewRecord(
        name=DELIVERY_VIEW,
        key=data["delivery_id"],
        version=version,
        data=dict(data),
        list_pk=delivery_list_key(status),
        list_sk=sort_key,
    )


def listed(data: Mapping[str, Any]) -> dict[str, Any]:
    """A record as the admin list and the CLI show it."""
    return {key: data.get(key) for key in LISTED_FIELDS}


@dataclass(frozen=True)
class Fact:
    """A notification, whose actor it concerns, and the redacted view to send."""

    notification: Notification
    actor_id: str
    view: dict[str, Any]


def attempt_facts(events: Sequence[LedgerEvent]) -> list[Fact]:
    """Fold an attempt stream event by event (the status view's own fold); one
    fact per notified status change, with the view as of that event."""
    if not events:
        return []
    stream_id = str(events[0].originator_id)
    found: list[Fact] = []
    previous: list[str | None] = [None]

    def after_each(fields: dict[str, Any]) -> None:
        status = fields["status"]
        notification = attempt_notification(
            stream_id, status, previous[0], fields["revision"], fields["updated_at"]
        )
        if notification is not None:
            found.append(Fact(notification, fields["owner_actor_id"], view_of(fields)))
        previous[0] = status

    fold_fields(stream_id, typed(stream_id, events), after_each)
    return found


def proposal_facts(proposal: Proposal, now: datetime) -> list[Fact]:
    view = proposal_view(proposal, now)
    return [Fact(n, proposal.actor_id, view) for n in proposal_notifications(proposal, now)]


@dataclass
class WebhookNotifier:
    """One subscription's tracked subscriber: writes delivery records (``Subscriber``)."""

    store: EventStore
    views: TrackedViewStore
    subscription_id: str
    events: frozenset[NotificationType]
    actor_id: str | None
    now: Callable[[], datetime]
    name: str = ""
    # start = "now": facts from before the subscription first ran are not told
    start_now: bool = False
    _start: datetime | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.name = self.name or f"webhook-{self.subscription_id}"

    def start_row(self) -> ViewRecord:
        """The moment this subscription starts from (version 1: the first one
        written stays, whichever process wrote it)."""
        return ViewRecord(
            name=START_VIEW,
            key=self.subscription_id,
            version=1,
            data={"subscription_id": self.subscription_id, "start_at": format_utc(self.now())},
        )

    def starts_at(self) -> datetime | None:
        """For ``start = "now"``: when the subscription first ran (recorded on
        first use); None when it is told of every fact."""
        if not self.start_now:
            return None
        if self._start is None:
            row = self.views.get_view(START_VIEW, self.subscription_id)
            if row is None:
                self.views.put_view(self.start_row())
                row = self.views.get_view(START_VIEW, self.subscription_id)
            if row is None:  # a store that lost the write it just acknowledged
                raise RuntimeError("the subscription's start was not recorded")
            self._start = parse_utc(row.data["start_at"])
        return self._start

    def records(self, stream_ids: Sequence[str]) -> list[ViewRecord]:
        """The delivery records (and expiry watches) the named streams imply."""
        from projections.webhook_fold import streams_records

        return streams_records([self], self.store, stream_ids)

    def wants(self, stream_id: str) -> bool:
        """Whether a stream can imply anything for this subscription: a proposal
        stream only when it asks for a ``proposal.*`` type, an attempt stream
        only for an ``attempt.*`` one (a stream it cannot use is not read)."""
        if stream_id.startswith(PROPOSAL_PREFIX):
            return any(kind.value.startswith("proposal.") for kind in self.events)
        if stream_id.startswith(ATTEMPT_ID_PREFIX):
            return any(kind.value.startswith("attempt.") for kind in self.events)
        return False

    def proposal_records(self, proposal: Proposal) -> list[ViewRecord]:
        """The delivery records and the expiry watch one proposal implies."""
        return self._deliveries(proposal_facts(proposal, self.now())) + self._watch(proposal)

    def attempt_records(self, events: Sequence[LedgerEvent]) -> list[ViewRecord]:
        """The delivery records one attempt stream's events imply."""
        return self._deliveries(attempt_facts(events))

    def _wanted(self, kind: NotificationType, actor_id: str) -> bool:
        return kind in self.events and self.actor_id in (None, actor_id)

    def _deliveries(self, facts: Iterable[Fact]) -> list[ViewRecord]:
        """The records of one subject's facts, in order; each names the one before."""
        stamp = format_utc(self.now())
        start = self.starts_at()
        rows: list[ViewRecord] = []
        previous: str | None = None
        for fact in facts:
            n = fact.notification
            if not self._wanted(n.type, fact.actor_id):
                continue
            if start is not None and n.at and parse_utc(n.at) < start:
                continue  # before the subscription started: not told
            ident = delivery_id(self.subscription_id, n.id)
            after, previous = previous, ident
            rows.append(
                delivery_row(
                    {
                        "delivery_id": ident,
                        "subscription_id": self.subscription_id,
                        "notification_id": n.id,
                        "type": n.type.value,
                        "subject_id": n.subject_id,
                        "subject_version": n.version,
                        "status": DeliveryStatus.PENDING.value,
                        "attempts": 0,
                        "next_try_at": stamp,
                        "last_error": None,
                        "response_status": None,
                        "created_at": n.at or stamp,
                        "updated_at": stamp,
                        "delivered_at": None,
                        "after": after,
                        "body": fact.view,
                    },
                    version=1,
                )
            )
        return rows

    # -- proposal.expired: derived from time, so a watch row says when to look ----

    def _watch(self, proposal: Proposal, version: int = 1) -> list[ViewRecord]:
        """A watch on the current version while it is presented: the sweep looks
        at the proposal again once its expiry has passed (nothing is written then)."""
        if not self._wanted(NotificationType.PROPOSAL_EXPIRED, proposal.actor_id):
            return []
        number = proposal.current_version
        if proposal.effective_status(number, self.now()) is not ProposalStatus.PRESENTED:
            return []
        expires_at = proposal.expiry_of(number)
        return [
            ViewRecord(
                name=EXPIRY_WATCH_VIEW,
                key=f"{self.subscription_id}#{proposal.id}#{number}",
                version=version,
                data={"proposal_id": proposal.id, "version": number, "expires_at": expires_at},
                list_pk=watch_list_key(self.subscription_id),
                list_sk=f"{sort_time(expires_at)}#{proposal.id}#{number}",
            )
        ]

    def sweep_expired(self, limit: int = 200) -> int:
        """Record ``proposal.expired`` for every watched version whose expiry has
        passed; returns how many deliveries were recorded. Each watch is retired
        (or moved to a later expiry) only after its deliveries are written, so a
        crash in between repeats the sweep, never loses it."""
        now = self.now()
        rows, _ = self.views.list_views(watch_list_key(self.subscription_id), limit, None)
        recorded = 0
        for watch in rows:
            if (watch.list_sk or "") >= sort_time(now):
                break
            proposal = self.store.get(Proposal, watch.data["proposal_id"])
            later: list[ViewRecord] = []
            if proposal is not None:
                for row in self._deliveries(proposal_facts(proposal, now)):
                    recorded += self.views.put_view(row)
                if proposal.current_version == watch.data["version"]:
                    later = self._watch(proposal, version=watch.version + 1)
            if not later:  # expired or decided: the watch leaves the list
                later = [replace(watch, version=watch.version + 1, list_pk=None, list_sk=None)]
            self.views.put_view(later[0])
        return recorded

    def apply(self, batch: LogBatch) -> int:
        """New delivery records and the batch's positions, in one atomic write."""
        return self.views.put_views(self.records(batch.stream_ids), batch.tracking)


def outstanding(views: ViewStore, page_size: int = 200) -> list[ViewRecord]:
    """Every pending or failing record of every subscription (each list read to
    its end): for admin tools and tests; a delivery pass reads ``due`` instead."""
    found: list[ViewRecord] = []
    for status in OUTSTANDING:
        cursor: str | None = None
        while True:
            rows, cursor = views.list_views(delivery_list_key(status.value), page_size, cursor)
            found.extend(rows)
            if cursor is None:
                break
    return found


def due(views: ViewStore, subscription_id: str, now: datetime, limit: int) -> list[ViewRecord]:
    """The outstanding records of one subscription whose next try has come, soonest
    first, at most ``limit``: one bounded read of each due list."""
    start = f"{subscription_id}#"
    until = f"{subscription_id}#{sort_time(now)}#~"  # "~" sorts after every delivery id
    found: list[ViewRecord] = []
    for status in OUTSTANDING:
        rows, _ = views.list_views(delivery_list_key(status.value), limit, start, until=until)
        found.extend(rows)
    return sorted(found, key=lambda r: r.list_sk or "")[:limit]


def legacy_outstanding(views: ViewStore, page_size: int = 200) -> list[ViewRecord]:
    """Outstanding records still in the lists used before the due lists."""
    found: list[ViewRecord] = []
    for list_key in LEGACY_LIST_KEYS:
        cursor: str | None = None
        while True:
            rows, cursor = views.list_views(list_key, page_size, cursor)
            found.extend(rows)
            if cursor is None:
                break
    return found


def chained(records: Iterable[ViewRecord]) -> list[tuple[ViewRecord, str | None]]:
    """Each record with the one before it of its (subscription, subject), in order of
    the fact: what ``after`` says for records written before it existed."""
    groups: dict[tuple[str, str], list[ViewRecord]] = {}
    for row in records:
        groups.setdefault((row.data["subscription_id"], row.data["subject_id"]), []).append(row)
    found: list[tuple[ViewRecord, str | None]] = []
    for rows in groups.values():
        previous: str | None = None
        for row in sorted(rows, key=_order):
            found.append((row, previous))
            previous = row.key
    return found


def _order(row: ViewRecord) -> tuple[int, str]:
    return int(row.data["subject_version"]), str(row.list_sk)
