"""The simulated world: who exists, what they may do, and how hard a schedule shakes it."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from adapters.executors.fake import FAKE_CAPABILITIES, fake_build_digest
from domain.directory import (
    DeliveryMode,
    DirectoryKind,
    actor_record_id,
    channel_binding_record_id,
    executor_build_record_id,
    grant_record_id,
    identity_binding_record_id,
    target_record_id,
)
from domain.services.approval import Provenance
from domain.services.execution import WorkerPolicy

LEASE = 60
# The settle window of each fake build: how long after its deadline an abandoned
# call may still land its effect (the executor contract; ``Executor.settle_seconds``).
SETTLE_SECONDS = {
    "fake.provider_idempotency": 0.0,
    "fake.correlation_lookup": 45.0,
    "fake.operator_only": 20.0,
}
# The watch of a "no effect" (I12), shorter than the default so schedules reach it.
WATCH = (60, 600, 3600)
POLICY = WorkerPolicy(
    lease_seconds=LEASE,
    backoff_base_seconds=1,
    backoff_max_seconds=120,
    max_predispatch_leases=4,
    max_dispatches=4,
)
# A fixed start keeps every schedule reproducible. It lies in the future: lookup
# items carry a TTL derived from this clock, and DynamoDB (and the emulator)
# reaps items whose TTL is in the real past, which would change a replay.
START = datetime(2100, 1, 1, 12, 0, tzinfo=UTC)
GOOD = Provenance("alice", "ib1", "cb1", "conv-1")
# Members of "finance", who vote on a proposal a @quorum policy holds for (I13).
MEMBERS = (
    Provenance("m1", "ib-m1", "cb-m1", "conv-m1"),
    Provenance("m2", "ib-m2", "cb-m2", "conv-m2"),
    Provenance("m3", "ib-m3", "cb-m3", "conv-m3"),
)
# The fallback group an escalating policy names: m3 (also in finance) and l1.
LEADS = (MEMBERS[2], Provenance("l1", "ib-l1", "cb-l1", "conv-l1"))
VOTERS = (*MEMBERS, LEADS[1])
STRANGERS = (
    Provenance("bob", "ib-bob", "cb1", "conv-1"),
    Provenance("alice", "ib1", "cb2", "conv-2"),
    Provenance("alice", "ib1", "cb1", "conv-2"),
    Provenance("alice", "ib-bob", "cb1", "conv-1"),
)
CAPABILITIES = tuple(FAKE_CAPABILITIES)
SIMULATE = ("success",) * 5 + (
    "no_write_error",
    "timeout_before_effect",
    "timeout_after_effect",
    "unsafe_receipt",
    "slow",
    "lookup_unknown",
    "resend_rejected",
    "resend_key_reused",
)
# (kind, record id, good values, ways it can be wrong)
DIRECTORY: tuple[tuple[DirectoryKind, str, dict[str, Any], tuple[dict[str, Any], ...]], ...] = (
    (DirectoryKind.ACTOR, actor_record_id("alice"), {"enabled": True}, ({"enabled": False},)),
    (
        DirectoryKind.IDENTITY_BINDING,
        identity_binding_record_id("ib1"),
        {"actor_id": "alice", "channel": "slack", "external_id": "U1", "active": True},
        (
            {"actor_id": "alice", "channel": "slack", "external_id": "U1", "active": False},
            {"actor_id": "bob", "channel": "slack", "external_id": "U1", "active": True},
            {"actor_id": "alice", "channel": "teams", "external_id": "U1", "active": True},
        ),
    ),
    (
        DirectoryKind.CHANNEL_BINDING,
        channel_binding_record_id("cb1"),
        {"conversation_key": "conv-1", "channel": "slack", "active": True},
        (
            {"conversation_key": "conv-1", "channel": "slack", "active": False},
            {"conversation_key": "conv-9", "channel": "slack", "active": True},
            {"conversation_key": "conv-1", "channel": "teams", "active": True},
        ),
    ),
    (
        DirectoryKind.PERMISSION_GRANT,
        grant_record_id("alice", "tasks.write"),
        {"granted": True},
        ({"granted": False},),
    ),
    *(
        (
            DirectoryKind.EXECUTOR_BUILD,
            executor_build_record_id(cap, fake_build_digest(cap)),
            {"delivery_mode": mode.value, "available": True},
            (
                {"delivery_mode": mode.value, "available": False},
                {
                    "delivery_mode": next(m for m in DeliveryMode if m is not mode).value,
                    "available": True,
                },
            ),
        )
        for cap, mode in FAKE_CAPABILITIES.items()
    ),
    (
        DirectoryKind.TARGET,
        target_record_id("task:42"),
        {"revision": "r7"},
        ({"revision": "r8"}, {"revision": "r9"}),
    ),
    # a member who can be disabled or leave the group between votes
    (
        DirectoryKind.ACTOR,
        actor_record_id("m1"),
        {"enabled": True, "groups": ["finance"]},
        ({"enabled": False, "groups": ["finance"]}, {"enabled": True, "groups": ["sales"]}),
    ),
)
STATIC_DIRECTORY: tuple[tuple[DirectoryKind, str, dict[str, Any]], ...] = (
    (DirectoryKind.ACTOR, actor_record_id("bob"), {"enabled": True}),
    (
        DirectoryKind.IDENTITY_BINDING,
        identity_binding_record_id("ib-bob"),
        {"actor_id": "bob", "channel": "slack", "external_id": "U2", "active": True},
    ),
    (
        DirectoryKind.CHANNEL_BINDING,
        channel_binding_record_id("cb2"),
        {"conversation_key": "conv-2", "channel": "slack", "active": True},
    ),
    (DirectoryKind.PERMISSION_GRANT, grant_record_id("bob", "tasks.write"), {"granted": True}),
    (DirectoryKind.ACTOR, actor_record_id("m2"), {"enabled": True, "groups": ["finance"]}),
    (DirectoryKind.ACTOR, actor_record_id("m3"), {"enabled": True, "groups": ["finance", "leads"]}),
    (DirectoryKind.ACTOR, actor_record_id("l1"), {"enabled": True, "groups": ["leads"]}),
    *(
        (
            DirectoryKind.IDENTITY_BINDING,
            identity_binding_record_id(m.identity_binding_id),
            {"actor_id": m.actor_id, "channel": "slack", "external_id": m.actor_id, "active": True},
        )
        for m in VOTERS
    ),
    *(
        (
            DirectoryKind.CHANNEL_BINDING,
            channel_binding_record_id(m.channel_binding_id),
            {"conversation_key": m.conversation_key, "channel": "slack", "active": True},
        )
        for m in VOTERS
    ),
)

# What each action may legitimately answer; anything else is a bug.
ALLOWED: dict[str, frozenset[str]] = {
    "propose": frozenset(
        {
            "invalid_spec",
            "executor_build_unavailable",
            "stale_version",
            "proposal_claimed",
            "concurrency_conflict",
            "store_unavailable",
            "policy_denied",
            "policy_digest_mismatch",
            # the directory as propose checks it: alice disabled, or not granted
            "actor_disabled",
            "permission_not_granted",
        }
    ),
    "present": frozenset(
        {
            "illegal_transition",
            "stale_version",
            "concurrency_conflict",
            "too_many_presentations",
            "store_unavailable",
            "invalid_input",  # a member's presentation of a version that needs no quorum
        }
    ),
    "approve": frozenset({"approval_unavailable", "proposal_conflicted", "store_unavailable"}),
    "vote": frozenset(
        {
            "approval_unavailable",
            "proposal_conflicted",
            "store_unavailable",
            "invalid_input",
            "illegal_transition",
            "stale_version",
            "concurrency_conflict",
            "too_many_presentations",
        }
    ),
    "deliver": frozenset({"store_unavailable"}),
    "recover": frozenset({"store_unavailable"}),
    "reconcile": frozenset(
        {"not_outcome_unknown", "stale_revision", "reconciler_unavailable", "store_unavailable"}
    ),
    "resolve": frozenset({"not_outcome_unknown", "stale_revision", "store_unavailable"}),
    "directory": frozenset({"concurrency_conflict", "store_unavailable"}),
    "project": frozenset({"store_unavailable"}),
    "clock": frozenset(),
    "credentials": frozenset(),
    "land": frozenset({"store_unavailable"}),
    "policy": frozenset({"concurrency_conflict", "store_unavailable"}),
    "grant": frozenset({"concurrency_conflict", "store_unavailable", "too_many_standing_grants"}),
    "revoke": frozenset({"concurrency_conflict", "store_unavailable"}),
    "escalate": frozenset({"store_unavailable"}),
}
WORKER_ACTIONS = ("deliver", "recover")


@dataclass(frozen=True)
class Profile:
    """How hard a schedule shakes the system."""

    steps: int = 80
    switch_rate: float = 0.3  # an actor parks at a commit / executor / crash point
    read_switch_rate: float = 0.05  # ... and at a read
    resume_rate: float = 0.55  # a tick resumes a parked actor rather than start one
    max_actors: int = 4
    crash_rate: float = 0.05
    fault_rate: float = 0.04
    read_fault_rate: float = 0.01
    check_due_every_step: bool = True
    drain_rounds: int = 40
    # An executor call outlives its deadline: the worker either waits on for it
    # (the call parks; others may let the lease expire and recover), or gives up
    # at once and the provider lands the effect later ("land"), within the settle
    # window of the build.
    overrun_rate: float = 0.5


FLAVOURS: dict[str, Profile] = {
    "default": Profile(),
    # many switches, few faults: races between live actors
    "races": Profile(
        switch_rate=0.5,
        read_switch_rate=0.15,
        resume_rate=0.6,
        max_actors=5,
        crash_rate=0.02,
        fault_rate=0.01,
        read_fault_rate=0.0,
    ),
    # many crashes and ambiguous commits
    "faults": Profile(switch_rate=0.2, crash_rate=0.1, fault_rate=0.1, read_fault_rate=0.03),
}


def profile_for(seed: int, steps: int | None = None) -> Profile:
    """Each seed picks a flavour, so a run mixes race-heavy and fault-heavy schedules."""
    profile = FLAVOURS[("default", "races", "faults")[seed % 3]]
    return profile if steps is None else replace(profile, steps=steps)


class SeededTokens:
    """Deterministic 256-bit tokens and ids drawn from the schedule's own generator."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def new_token(self) -> str:
        return f"{self.rng.getrandbits(256):064x}"

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{self.rng.getrandbits(128):032x}"
