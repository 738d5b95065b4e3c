"""Scenario 7 (authorization change after approval) and pre-dispatch backoff."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.executors.fake import fake_build_digest
from domain.directory import (
    DirectoryKind,
    actor_record_id,
    channel_binding_record_id,
    executor_build_record_id,
    grant_record_id,
    identity_binding_record_id,
    target_record_id,
)
from domain.errors import StoreUnavailable
from domain.services.execution import Outcome
from domain.services.read_cache import ReadCache
from tests.support.worlds.execution import MODES, ExecutionWorld

CHANGES: dict[str, tuple[DirectoryKind, str, dict[str, Any], str]] = {
    "actor_disabled": (
        DirectoryKind.ACTOR,
        actor_record_id("alice"),
        {"enabled": False},
        "actor_disabled",
    ),
    "identity_deactivated": (
        DirectoryKind.IDENTITY_BINDING,
        identity_binding_record_id("ib1"),
        {"actor_id": "alice", "channel": "slack", "external_id": "U1", "active": False},
        "identity_binding",
    ),
    "channel_deactivated": (
        DirectoryKind.CHANNEL_BINDING,
        channel_binding_record_id("cb1"),
        {"conversation_key": "conv-1", "channel": "slack", "active": False},
        "channel_binding",
    ),
    "permission_revoked": (
        DirectoryKind.PERMISSION_GRANT,
        grant_record_id("alice", "tasks.write"),
        {"granted": False},
        "permission_not_granted",
    ),
    "target_moved": (
        DirectoryKind.TARGET,
        target_record_id("task:42"),
        {"revision": "r9"},
        "target_drift",
    ),
}


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("change", sorted([*CHANGES, "build_withdrawn"]))
def test_authorization_change_after_approval_fails_safe_without_a_call(
    xworld: ExecutionWorld, change: str, mode: str
) -> None:
    attempt_id = xworld.approved(mode)
    if change == "build_withdrawn":
        capability = MODES[mode]
        xworld.put(
            DirectoryKind.EXECUTOR_BUILD,
            executor_build_record_id(capability, fake_build_digest(capability)),
            delivery_mode=mode,
            available=False,
        )
        reason = "executor_build_unavailable"
    else:
        kind, record_id, values, reason = CHANGES[change]
        xworld.put(kind, record_id, **values)
    assert xworld.worker().process(attempt_id) is Outcome.FAILED_SAFE
    attempt = xworld.attempt(attempt_id)
    assert attempt.status == "failed_safe"
    assert attempt.result == {"kind": "failed_safe", "source": "worker", "reason_code": reason}
    assert xworld.effects.call_count() == 0
    assert "DispatchStarted" not in xworld.topics(attempt_id)


class FlakyStore:
    """Fails every directory read once, as a transient outage would."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.fail_directory_reads = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def get(self, cls: Any, stream_id: str) -> Any:
        if self.fail_directory_reads and stream_id.startswith("actor:"):
            raise StoreUnavailable()
        return self.inner.get(cls, stream_id)

    def events_at(self, keys: Any) -> Any:
        if self.fail_directory_reads and any(s.startswith("actor:") for s, _ in keys):
            raise StoreUnavailable()
        return self.inner.events_at(keys)


def test_transient_failure_before_dispatch_backs_off_then_fails_safe(
    xworld: ExecutionWorld,
) -> None:
    from dataclasses import replace

    attempt_id = xworld.approved("provider_idempotency")
    flaky = FlakyStore(xworld.store)
    worker = xworld.worker(max_predispatch_leases=3, backoff_base_seconds=10)
    # A worker of its own (another process): nothing cached, so it reads.
    worker.ctx = replace(xworld.ctx, store=flaky, cache=ReadCache())  # type: ignore[arg-type]
    assert worker.process(attempt_id) is Outcome.REQUEUED
    first = xworld.attempt(attempt_id)
    assert first.status == "queued"
    assert worker.process(attempt_id) is Outcome.SKIPPED  # backing off
    xworld.clock.advance(10)
    assert worker.process(attempt_id) is Outcome.REQUEUED
    xworld.clock.advance(20)  # exponential: 10, 20, ...
    assert worker.process(attempt_id) is Outcome.REQUEUED
    xworld.clock.advance(40)
    assert worker.process(attempt_id) is Outcome.FAILED_SAFE
    attempt = xworld.attempt(attempt_id)
    assert attempt.result is not None
    assert attempt.result["reason_code"] == "predispatch_lease_limit"
    assert xworld.effects.call_count() == 0
