"""The trace context on ``Queued``: a new optional field that old streams never had.

A ``Queued`` event stored before the field existed replays with
``trace_context=None``, and its hash (what the next event links to) is the
hash of what was stored, so old chains still verify.
"""

from __future__ import annotations

import json

from adapters.mapping import make_library_mapper
from adapters.store import make_mapper
from domain.attempt import ExecutionAttempt
from domain.audit import verify_chain
from domain.tracing import clean_trace_context
from tests.support.aggregates import new_attempt
from tests.support.factories import T0, digest
from tests.support.replay import Replay

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_an_old_queued_event_without_the_field_replays_and_keeps_its_chain() -> None:
    mapper = make_mapper()
    attempt = new_attempt(Replay())
    (queued,) = attempt.collect_events()
    # Stored as events were then: the eventsourcing library's JSON form.
    stored = make_library_mapper().to_stored_event(queued)
    state = json.loads(stored.state)
    assert state.pop("trace_context") is None
    old = stored.__class__(
        originator_id=stored.originator_id,
        originator_version=stored.originator_version,
        topic=stored.topic,
        state=json.dumps(state).encode(),
    )

    old_event = mapper.to_domain_event(old)
    replayed = old_event.mutate(None)
    assert isinstance(replayed, ExecutionAttempt)
    assert replayed.trace_context is None
    assert "trace_context" not in old_event.data()  # hashed exactly as it was stored

    replayed.lease(owner="lease_1", now=T0, lease_seconds=60)
    (leased,) = replayed.collect_events()
    decoded = [old_event, mapper.to_domain_event(mapper.to_stored_event(leased))]
    assert verify_chain(attempt.id, decoded).ok


def test_a_new_queued_event_carries_the_context_through_storage() -> None:
    mapper = make_mapper()
    attempt = ExecutionAttempt(
        attempt_id="att_2",
        proposal_id="prop_1",
        proposal_version=1,
        payload_hash=digest("1"),
        view_hash=digest("2"),
        idempotency_key="idk_2",
        capability="fake.provider_idempotency",
        executor_build=digest("a"),
        delivery_mode="provider_idempotency",
        actor_id="alice",
        identity_binding_id="ib",
        channel_binding_id="cb",
        conversation_key="c",
        permission="tasks.write",
        target_id=None,
        target_revision=None,
        at="2026-03-01T12:00:00Z",
        trace_context={"traceparent": TRACEPARENT},
    )
    (queued,) = attempt.collect_events()
    replayed = mapper.to_domain_event(mapper.to_stored_event(queued)).mutate(None)
    assert replayed.trace_context == {"traceparent": TRACEPARENT}


def test_only_short_w3c_keys_are_kept() -> None:
    assert clean_trace_context(None) is None
    assert clean_trace_context({}) is None
    assert clean_trace_context({"baggage": "user=alice"}) is None
    assert clean_trace_context({"traceparent": "x" * 600}) is None
    assert clean_trace_context({"traceparent": "a\nb"}) is None
    assert clean_trace_context({"traceparent": TRACEPARENT, "tracestate": "k=v", "other": "z"}) == {
        "traceparent": TRACEPARENT,
        "tracestate": "k=v",
    }
