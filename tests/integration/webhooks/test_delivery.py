"""Signed webhooks against a real receiver process on loopback, on memory, SQLite
and DynamoDB: one delivery per event and subscription when healthy; every one
eventually after the receiver was down, answered 500 or stalled past the
timeout (time driven by the injected clock); nothing of another actor; nothing
lost or repeated (once acknowledged) across a restart."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from adapters.bootstrap import Ledger
from adapters.store import LedgerStore
from adapters.webhooks.deliverer import BACKOFF_MAX_SECONDS, Deliverer
from domain.notifications import NotificationType, notification_id
from domain.services.decisions import decline
from projections.ports import LogBatch, ViewRecord
from projections.webhooks import delivery_list_key, outstanding
from tests.support.subscribers import drain, restarted
from tests.support.webhook_receiver import Receiver
from tests.support.webhooks import subscription, webhook_ledger
from tests.support.worlds.execution import ExecutionWorld


def backend_kind(ledger: Ledger) -> str:
    assert ledger.backend is not None
    return ledger.backend.kind


def records(ledger: Ledger, status: str) -> list[ViewRecord]:
    assert ledger.views is not None
    rows, _ = ledger.views.list_views(delivery_list_key(status), 500)
    return list(rows)


def deliver_all(ledger: Ledger, deliverer: Deliverer, rounds: int = 40) -> int:
    """Run passes, moving the clock past the longest backoff, until nothing is outstanding."""
    assert ledger.views is not None
    passes = 0
    while outstanding(ledger.views):
        passes += 1
        assert passes <= rounds, [r.data for r in outstanding(ledger.views)]
        if not deliverer.run_once():
            ledger.clock.advance(BACKOFF_MAX_SECONDS + 1)  # type: ignore[attr-defined]
    return passes


def facts(pworld: ExecutionWorld, count: int) -> dict[str, str]:
    """``count`` succeeded attempts and one declined proposal of alice:
    notification id -> type."""
    expected: dict[str, str] = {}
    for _ in range(count):
        attempt_id = pworld.approved("provider_idempotency")
        pworld.worker().process(attempt_id)
        attempt = pworld.attempt(attempt_id)
        assert attempt.status == "succeeded"
        kind = NotificationType.ATTEMPT_SUCCEEDED
        expected[notification_id(kind, attempt_id, attempt.version)] = kind.value
    proposal_id = pworld.propose()
    token = pworld.present(proposal_id).token
    decline(pworld.ctx, token=token, provenance=pworld.who)
    kind = NotificationType.PROPOSAL_DECLINED
    expected[notification_id(kind, proposal_id, 1)] = kind.value
    return expected


def test_one_signed_delivery_per_event_and_subscription_and_none_of_another_actor(
    store: LedgerStore,
    pworld: ExecutionWorld,
    request: pytest.FixtureRequest,
    receiver: Receiver,
) -> None:
    ledger = webhook_ledger(
        store,
        pworld,
        request,
        [
            subscription(f"{receiver.url}/all", "all"),
            subscription(f"{receiver.url}/alice", "alice", actor_id="alice"),
            subscription(f"{receiver.url}/bob", "bob", actor_id="bob"),
            subscription(
                f"{receiver.url}/declines",
                "declines",
                events=frozenset({NotificationType.PROPOSAL_DECLINED}),
            ),
        ],
    )
    expected = facts(pworld, 3)
    behind = ledger.projection_lag().get("webhook-bob")
    assert behind is None or behind.events_behind > 0
    drain(ledger)
    drain(ledger)  # caught up: nothing more is recorded
    assert len(records(ledger, "pending")) == 4 + 4 + 0 + 1

    deliver_all(ledger, ledger.make_deliverer(random=lambda: 0.5))

    assert receiver.acknowledged("/all") == {i: 1 for i in expected}
    assert receiver.acknowledged("/alice") == {i: 1 for i in expected}
    assert receiver.acknowledged("/bob") == {}
    per = [sum(receiver.acknowledged(p).values()) for p in ("/all", "/alice", "/bob", "/declines")]
    print(
        f"webhook healthy ({backend_kind(ledger)}): {len(expected)} facts x 4 subscriptions "
        f"(one filtered to another actor, one to declines): "
        f"{len(receiver.entries())} requests, acknowledged per subscription: {per}"
    )
    declined = {i for i, kind in expected.items() if kind == "proposal.declined"}
    assert receiver.acknowledged("/declines") == {i: 1 for i in declined}
    assert all(e["valid"] for e in receiver.entries())
    for body in receiver.bodies():
        assert body["type"] in ("attempt.succeeded", "proposal.declined")
        assert body.get("status") in ("succeeded", "declined")
    delivered = records(ledger, "delivered")
    assert len(delivered) == 9
    assert all(r.data["attempts"] == 1 and r.data["response_status"] == 204 for r in delivered)
    assert ledger.metrics.value("ledger_webhook_deliveries_total", outcome="delivered") == 9
    lag = ledger.projection_lag()  # what /readyz and the lag gauges show
    assert ledger.backend is not None
    if ledger.backend.kind != "dynamodb":  # a stream reader knows only what it has read
        assert set(lag) == {
            "status",
            "webhook-all",
            "webhook-alice",
            "webhook-bob",
            "webhook-declines",
        }
    assert all(found.events_behind == 0 for found in lag.values())
    assert (
        'ledger_projection_events_behind{subscriber="webhook-bob"}' in (ledger.metrics.render())
        or ledger.backend.kind == "dynamodb"
    )


def test_everything_arrives_once_after_an_outage_500s_and_timeouts(
    store: LedgerStore,
    pworld: ExecutionWorld,
    request: pytest.FixtureRequest,
    receiver: Receiver,
) -> None:
    ledger = webhook_ledger(store, pworld, request, [subscription(receiver.url)])
    expected = facts(pworld, 3)
    drain(ledger)
    deliverer = ledger.make_deliverer(random=lambda: 1.0)

    receiver.stop()  # down
    assert deliverer.run_once() == 4
    scraped = ledger.metrics.render()
    assert 'ledger_webhook_deliveries{status="failing"} 4.0' in scraped
    assert 'ledger_webhook_deliveries{status="pending"} 0.0' in scraped
    failing = records(ledger, "failing")
    assert {r.data["last_error"] for r in failing} == {"connect"}
    assert {r.data["response_status"] for r in failing} == {None}
    assert deliverer.run_once() == 0  # nothing is due before its backoff ends

    receiver.start()
    receiver.set_mode("500")
    ledger.clock.advance(BACKOFF_MAX_SECONDS + 1)  # type: ignore[attr-defined]
    assert deliverer.run_once() == 4
    failing = records(ledger, "failing")
    assert {(r.data["last_error"], r.data["response_status"]) for r in failing} == {
        ("http_status", 500)
    }

    receiver.set_mode("stall")
    ledger.clock.advance(BACKOFF_MAX_SECONDS + 1)  # type: ignore[attr-defined]
    assert deliverer.run_once() == 4
    assert {r.data["last_error"] for r in records(ledger, "failing")} == {"timeout"}

    receiver.set_mode("ok")
    deliver_all(ledger, deliverer)
    assert receiver.acknowledged() == {i: 1 for i in expected}
    received = receiver.entries()
    print(
        f"webhook outage ({backend_kind(ledger)}): {len(expected)} facts; receiver down, "
        f"then 500, then stalled past the timeout, then healthy: {len(received)} requests "
        f"reached it ({sum(e['status'] == 500 for e in received)} answered 500, "
        f"{sum(e['mode'] == 'stall' for e in received)} stalled), every fact acknowledged "
        f"exactly {set(receiver.acknowledged().values())} time(s)"
    )
    assert all(r.data["attempts"] == 4 for r in records(ledger, "delivered"))
    assert ledger.metrics.value("ledger_webhook_deliveries_total", outcome="failed") == 12


def test_a_restart_loses_no_delivery_and_repeats_only_unacknowledged_ones(
    store: LedgerStore,
    pworld: ExecutionWorld,
    request: pytest.FixtureRequest,
    receiver: Receiver,
) -> None:
    ledger = webhook_ledger(store, pworld, request, [subscription(receiver.url)])
    expected = facts(pworld, 2)
    drain(ledger)
    first = ledger.make_deliverer(random=lambda: 0.5)
    (head, *_) = outstanding(ledger.views)  # type: ignore[arg-type]
    assert first.deliver(head, ledger.webhooks[0])

    more = facts(pworld, 2)  # written while "down"
    again = restarted(ledger)
    drain(again)
    drain(again)
    deliver_all(again, again.make_deliverer(random=lambda: 0.5))
    assert receiver.acknowledged() == {i: 1 for i in {**expected, **more}}


def test_a_send_whose_answer_was_lost_is_repeated_and_the_next_one_waits(
    store: LedgerStore,
    pworld: ExecutionWorld,
    request: pytest.FixtureRequest,
    receiver: Receiver,
) -> None:
    """In order per attempt: an attempt's ``manually_resolved`` is not sent until
    its ``outcome_unknown`` was acknowledged."""
    from domain.services.execution import CrashPoint
    from domain.services.execution import SimulatedCrash as ExecutionCrash
    from domain.services.resolution import resolve
    from tests.support.worlds.execution import CrashAt

    ledger = webhook_ledger(store, pworld, request, [subscription(receiver.url)])
    attempt_id = pworld.approved("operator_reconciliation_only")
    with pytest.raises(ExecutionCrash):
        pworld.worker(CrashAt(CrashPoint.AFTER_DISPATCH_MARKER)).process(attempt_id)
    pworld.recover_after_lease()
    attempt = pworld.attempt(attempt_id)
    assert attempt.status == "outcome_unknown"
    resolve(
        pworld.ctx,
        attempt_id=attempt_id,
        expected_revision=attempt.revision,
        outcome="effect_applied",
        reason="checked the provider",
        resolved_by="admin-1",
    )
    drain(ledger)
    kinds = sorted(r.data["type"] for r in records(ledger, "pending"))
    assert kinds == ["attempt.manually_resolved", "attempt.outcome_unknown"]

    receiver.set_mode("500")
    deliverer = ledger.make_deliverer(random=lambda: 0.0)
    for _ in range(3):
        deliverer.run_once()
    sent = [json.loads(e["body"])["type"] for e in receiver.entries()]
    assert set(sent) == {"attempt.outcome_unknown"}
    receiver.set_mode("ok")
    deliver_all(ledger, deliverer)
    order = [json.loads(e["body"])["type"] for e in receiver.entries() if e["status"] == 204]
    assert order == ["attempt.outcome_unknown", "attempt.manually_resolved"]


def test_proposal_expired_is_recorded_from_the_clock_once_and_never_after_a_decision(
    store: LedgerStore,
    pworld: ExecutionWorld,
    request: pytest.FixtureRequest,
    receiver: Receiver,
) -> None:
    """Expiry writes no event: the watch the notifier leaves on a presented
    version makes the sweep record ``proposal.expired`` once its time has come."""
    ledger = webhook_ledger(store, pworld, request, [subscription(receiver.url)])
    lapsing = pworld.propose()
    pworld.present(lapsing)
    decided = pworld.propose()
    decline(pworld.ctx, token=pworld.present(decided).token, provenance=pworld.who)
    drain(ledger)
    (notifier,) = ledger.webhook_notifiers()
    assert notifier.sweep_expired() == 0  # nothing has expired yet
    assert [r.data["type"] for r in records(ledger, "pending")] == ["proposal.declined"]

    pworld.clock.advance(2 * 86400)  # past every expiry; nothing is written to the log
    drain(ledger)
    assert notifier.sweep_expired() == 1
    assert notifier.sweep_expired() == 0  # the watch is retired: once only
    deliver_all(ledger, ledger.make_deliverer(random=lambda: 0.5))
    kinds = sorted(json.loads(e["body"])["type"] for e in receiver.entries())
    assert kinds == ["proposal.declined", "proposal.expired"]
    expired = next(b for b in receiver.bodies() if b["type"] == "proposal.expired")
    assert (expired["proposal_id"], expired["status"]) == (lapsing, "expired")
    assert receiver.acknowledged() == {
        notification_id(NotificationType.PROPOSAL_EXPIRED, lapsing, 1): 1,
        notification_id(NotificationType.PROPOSAL_DECLINED, decided, 1): 1,
    }


def test_two_deliverers_on_one_store_send_each_delivery_once(
    store: LedgerStore,
    pworld: ExecutionWorld,
    request: pytest.FixtureRequest,
    receiver: Receiver,
) -> None:
    """Two processes (or concurrent Lambdas) deliver at once from the same listing:
    the version-guarded claim before each send lets only one of them send it."""
    from adapters.webhooks.deliverer import HttpxTransport

    ledger = webhook_ledger(store, pworld, request, [subscription(receiver.url)])
    expected = facts(pworld, 2)
    drain(ledger)
    other = restarted(ledger).make_deliverer(random=lambda: 0.5)
    nested: list[int] = []

    class RacingTransport(HttpxTransport):
        """The first deliverer's sends: the other deliverer runs a whole pass
        in the middle of each one."""

        def post(self, url: str, headers: Any, body: bytes, timeout: float) -> int:
            nested.append(other.run_once())
            return super().post(url, headers, body, timeout)

    first = ledger.make_deliverer(random=lambda: 0.5, transport=RacingTransport())
    # the first sends one; in its middle the other sends the two it could claim; the
    # first's stale listing then loses both claims and sends nothing more
    assert (first.run_once(), nested) == (1, [2])
    assert receiver.acknowledged() == {i: 1 for i in expected}
    assert len(records(ledger, "delivered")) == 3


def test_a_notifier_killed_after_its_write_or_failing_to_write_loses_and_doubles_nothing(
    store: LedgerStore,
    pworld: ExecutionWorld,
    request: pytest.FixtureRequest,
    receiver: Receiver,
) -> None:
    """The delivery records and the notifier's position are one write: a crash right
    after it repeats the batch (refused by the version guard), a failed write
    records nothing, and either way every fact is delivered exactly once."""
    from adapters.runtime import Runtime, SubscriberRun, subscriber_runs
    from tests.support.subscribers import (
        CrashAfterApply,
        FailingWrites,
        SimulatedCrash,
    )

    ledger = webhook_ledger(store, pworld, request, [subscription(receiver.url)])
    expected = facts(pworld, 2)
    runtime = Runtime(ledger, None, recovery_interval=3600, recovery=False, poll_seconds=0)
    _status, hook = subscriber_runs(ledger)
    assert hook.subscriber.name == "webhook-chat"
    failing = SubscriberRun(
        replace(hook.subscriber, views=FailingWrites(ledger.views)), hook.reader
    )

    def until_crash(run: SubscriberRun) -> None:
        with pytest.raises(SimulatedCrash):  # a stream reader may need a few polls
            for _ in range(50):
                runtime.run_subscriber_once(run)

    until_crash(failing)
    assert records(ledger, "pending") == []  # nothing recorded, position unmoved
    hook.reader.reset()

    def holds_the_last_fact(batch: LogBatch) -> bool:  # the declined proposal
        declined = NotificationType.PROPOSAL_DECLINED
        return any(notification_id(declined, s, 1) in expected for s in batch.stream_ids)

    until_crash(SubscriberRun(hook.subscriber, CrashAfterApply(hook.reader, holds_the_last_fact)))
    assert len(records(ledger, "pending")) == 3  # the write itself happened

    again = restarted(ledger)  # reads the position written with the records
    drain(again)
    assert len(records(again, "pending")) == 3
    deliver_all(again, again.make_deliverer(random=lambda: 0.5))
    assert receiver.acknowledged() == {i: 1 for i in expected}


def test_a_failing_delivery_waits_at_most_the_configured_backoff_cap(
    store: LedgerStore,
    pworld: ExecutionWorld,
    request: pytest.FixtureRequest,
    receiver: Receiver,
) -> None:
    """LEDGER_WEBHOOK_BACKOFF_MAX_SECONDS caps the doubling wait: with the jitter
    drawn at its top and the cap at 2 s, every failed send is due again 2 s later
    (uncapped, the fourth would wait 8 s)."""
    ledger = webhook_ledger(store, pworld, request, [subscription(receiver.url)])
    ledger.settings = ledger.settings.model_copy(update={"webhook_backoff_max_seconds": 2})
    facts(pworld, 1)
    drain(ledger)
    deliverer = ledger.make_deliverer(random=lambda: 1.0)
    receiver.set_mode("500")
    sends = [deliverer.run_once()]
    for _ in range(5):
        ledger.clock.advance(2)  # type: ignore[attr-defined]
        sends.append(deliverer.run_once())
    assert sends == [2] * 6  # two facts (proposal and attempt), sent again every 2 s
    receiver.set_mode("ok")
    ledger.clock.advance(2)  # type: ignore[attr-defined]
    deliver_all(ledger, deliverer)
    assert all(r.data["attempts"] == 7 for r in records(ledger, "delivered"))
