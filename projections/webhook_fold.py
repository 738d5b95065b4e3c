"""The webhook fold of a stream batch: every subscription's delivery records
from one read of each stream (``projections.webhooks``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from domain.ports import EventStore
from domain.proposal import Proposal
from projections.inbox import PROPOSAL_PREFIX
from projections.ports import ViewRecord
from projections.webhooks import WebhookNotifier


def streams_records(
    notifiers: Sequence[WebhookNotifier], store: EventStore, stream_ids: Iterable[str]
) -> list[ViewRecord]:
    """What the named streams imply for every subscription: each stream that some
    subscription can use is read once (one consistent read) and folded for all
    of them."""
    named = list(dict.fromkeys(stream_ids))
    if named:  # a start = "now" subscription starts at its first batch, wanted or not
        for notifier in notifiers:
            notifier.starts_at()
    rows: list[ViewRecord] = []
    for stream_id in named:
        wanting = [n for n in notifiers if n.wants(stream_id)]
        if not wanting:
            continue
        if stream_id.startswith(PROPOSAL_PREFIX):
            proposal = store.get(Proposal, stream_id)
            if proposal is not None:
                rows += [row for n in wanting for row in n.proposal_records(proposal)]
        else:
            events = store.audit_events(stream_id)[0]
            rows += [row for n in wanting for row in n.attempt_records(events)]
    return rows
