"""Webhook subscriptions under test: a ledger with subscriptions on the test's store,
the shared secret of the receiver, and seeded delivery records."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.bootstrap import Ledger, backend_for, build_ledger
from adapters.settings import load_settings
from adapters.store import LedgerStore
from adapters.webhooks.config import WebhookSubscription
from domain.notifications import NotificationType
from projections.webhooks import delivery_id, delivery_row
from tests.support.worlds.execution import ExecutionWorld

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
EVERYTHING = frozenset(NotificationType) - {NotificationType.PROPOSAL_APPROVED}
"""Every type the delivery tests count (``proposal.approved``, one per claim, has
its own tests in tests/integration/webhooks/test_approved.py)."""


def subscription(
    url: str,
    sub_id: str = "chat",
    *,
    actor_id: str | None = None,
    events: frozenset[NotificationType] = EVERYTHING,
    timeout: float = 0.5,
) -> WebhookSubscription:
    return WebhookSubscription(
        id=sub_id,
        url=url,
        secret_env="LEDGER_WEBHOOK_SECRET",
        events=events,
        actor_id=actor_id,
        timeout_seconds=timeout,
        secret=SECRET,
    )


def webhook_ledger(
    store: LedgerStore,
    pworld: ExecutionWorld,
    request: pytest.FixtureRequest,
    subscriptions: list[WebhookSubscription],
    backend: Any = None,
) -> Ledger:
    if backend is None:
        backend = backend_for(store.recorder)
        if backend.kind == "dynamodb":
            from adapters.dynamodb.backend import DynamoDBBackend
            from tests.support.subscribers import streams_client

            endpoint = request.getfixturevalue("dynamodb_endpoint")
            backend = DynamoDBBackend(
                store.recorder,  # type: ignore[arg-type]
                streams_client=streams_client(endpoint),
            )
    ledger = build_ledger(
        load_settings(store="memory", env="test"), backend=backend, clock=pworld.clock
    )
    ledger.webhooks = list(subscriptions)
    return ledger


def record(n: int, status: str, **changes: Any) -> dict[str, Any]:
    ident = delivery_id("chat", f"msg_{n:040d}")
    return {
        "delivery_id": ident,
        "subscription_id": "chat",
        "notification_id": f"msg_{n:040d}",
        "type": "attempt.succeeded",
        "subject_id": f"att_{n:064d}",
        "subject_version": 5,
        "status": status,
        "attempts": 2,
        "next_try_at": "2030-01-01T00:10:00Z",
        "last_error": "http_status" if status == "failing" else None,
        "response_status": 500 if status == "failing" else 204,
        "created_at": f"2030-01-01T00:00:{n:02d}Z",
        "updated_at": "2030-01-01T00:05:00Z",
        "delivered_at": None,
        "body": {"attempt_id": f"att_{n:064d}", "secret": "CANARY"},
        **changes,
    }


def seed(ledger: Ledger, failing: int = 5, delivered: int = 2) -> list[str]:
    assert ledger.views is not None
    ids = []
    for n in range(failing + delivered):
        data = record(n, "failing" if n < failing else "delivered")
        ledger.views.put_view(delivery_row(data, version=3))
        ids.append(data["delivery_id"])
    return ids
