"""Aggregates in a known state for the domain tests: a proposal with its versions
and presentations, an execution attempt leased, dispatched or outcome_unknown."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from domain.attempt import ExecutionAttempt
from domain.directory import DeliveryMode
from domain.proposal import Proposal
from domain.spec import parse_spec, payload_hash, view_hash
from domain.timeutil import format_utc
from tests.support.factories import T0, digest, spec_data
from tests.support.replay import Replay

RENDERER = "renderer:v1"
TTL = timedelta(minutes=30)
NOW = T0 + timedelta(minutes=1)
AT = format_utc(T0)


def version_args(**overrides: Any) -> dict[str, Any]:
    spec = parse_spec(spec_data(**overrides))
    ph = payload_hash(spec)
    return {
        "spec": spec.canonical_dict(),
        "payload_hash": ph,
        "view_hash": view_hash(ph, RENDERER, f"preview of {ph}"),
        "renderer_build": RENDERER,
    }


def new_proposal(replay: Replay) -> Proposal:
    return replay.track(Proposal(proposal_id="prop_1", actor_id="alice", at=AT, **version_args()))


def present(proposal: Proposal, presentation_id: str, version: int | None = None) -> None:
    proposal.present(
        presentation_id=presentation_id,
        version=proposal.current_version if version is None else version,
        token_hash=f"hash-of-{presentation_id}",
        identity_binding_id="ib-alice",
        channel_binding_id="cb-1",
        conversation_key="conv-1",
        expires_at=format_utc(T0 + TTL),
        at=AT,
    )


def revise(proposal: Proposal, expected_version: int | None, **spec: Any) -> int:
    return proposal.revise(
        expected_version=expected_version,
        at=AT,
        **version_args(**(spec or {"destination": f"list-{proposal.current_version + 1}"})),
    )


def claim(proposal: Proposal, presentation_id: str, now: Any = NOW) -> None:
    proposal.claim(presentation_id=presentation_id, attempt_id="att_1", now=now, at=AT)


LEASE = 60
AFTER_EXPIRY = T0 + timedelta(seconds=LEASE)
RECEIPT = {"provider_id": "task-981", "applied_at": "2026-01-01T12:00:05Z"}


def new_attempt(
    replay: Replay, mode: DeliveryMode = DeliveryMode.PROVIDER_IDEMPOTENCY
) -> ExecutionAttempt:
    return replay.track(
        ExecutionAttempt(
            attempt_id="att_1",
            proposal_id="prop_1",
            proposal_version=1,
            payload_hash=digest("1"),
            view_hash=digest("2"),
            idempotency_key="idk_1",
            capability="fake.provider_idempotency",
            executor_build=digest("a"),
            delivery_mode=mode.value,
            actor_id="alice",
            identity_binding_id="ib-alice",
            channel_binding_id="cb-1",
            conversation_key="conv-1",
            permission="tasks.write",
            target_id="task:42",
            target_revision="r7",
            at=format_utc(T0),
        )
    )


def leased(
    replay: Replay, mode: DeliveryMode = DeliveryMode.PROVIDER_IDEMPOTENCY
) -> tuple[ExecutionAttempt, int]:
    attempt = new_attempt(replay, mode)
    return attempt, attempt.lease(owner="worker-a", now=T0, lease_seconds=LEASE)


def dispatched(
    replay: Replay, mode: DeliveryMode = DeliveryMode.PROVIDER_IDEMPOTENCY
) -> tuple[ExecutionAttempt, int]:
    attempt, gen = leased(replay, mode)
    attempt.mark_dispatch(generation=gen, now=T0 + timedelta(seconds=1))
    return attempt, gen


def outcome_unknown(replay: Replay) -> ExecutionAttempt:
    attempt, _ = dispatched(replay, DeliveryMode.OPERATOR_RECONCILIATION_ONLY)
    attempt.record_unknown(reason_code="lease_expired_after_dispatch", now=AFTER_EXPIRY)
    return attempt
