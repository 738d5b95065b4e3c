"""A small world for approval tests: directory, clock, registry, helpers."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from adapters.executors.fake import FAKE_CAPABILITIES, fake_build_digest, fake_content_schema
from adapters.executors.registry import StaticExecutorRegistry
from adapters.store import LedgerStore
from adapters.system import SecretsTokenSource
from domain.approvals import ApprovalKind, kind_of, needs_channel
from domain.attempt import ExecutionAttempt
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
from domain.ports import ExecutionReceipt, ExecutionRequest
from domain.proposal import PresentationStatus, Proposal, ProposalStatus
from domain.services.approval import Provenance
from domain.services.context import ServiceContext
from domain.services.directory import put_record
from domain.services.proposals import PresentationResult, present, propose
from domain.spec import derive_attempt_id, format_utc
from tests.support.clocks import START, FixedClock
from tests.support.factories import schema_digest_for

DIGEST = "sha256:" + "ab" * 32
CAPABILITY = "fake.provider_idempotency"
BUILD = fake_build_digest(CAPABILITY)

SPEC_EXPIRES = START + timedelta(days=2)


class RecordingTokens(SecretsTokenSource):
    """Real tokens and ids; remembers every proposal id it hands out."""

    def __init__(self) -> None:
        self.proposal_ids: list[str] = []

    def new_id(self, prefix: str) -> str:
        value = super().new_id(prefix)
        if prefix == "prop":
            self.proposal_ids.append(value)
        return value


class ForbiddenExecutor:
    """Fails the test if anything calls it: approval must never execute (I6)."""

    def __init__(self, capability: str, mode: DeliveryMode) -> None:
        self.capability = capability
        self.build_digest = fake_build_digest(capability)
        self.content_schema = fake_content_schema(capability)
        self.delivery_mode = mode
        self.calls = 0

    def execute(self, request: ExecutionRequest) -> ExecutionReceipt:
        self.calls += 1
        raise AssertionError("an executor was called from the approval path")


def forbidden_registry() -> tuple[StaticExecutorRegistry, list[ForbiddenExecutor]]:
    registry = StaticExecutorRegistry()
    executors = [ForbiddenExecutor(cap, mode) for cap, mode in FAKE_CAPABILITIES.items()]
    for executor in executors:
        registry.register(executor)
    return registry, executors


def base_spec(**changes: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "capability": CAPABILITY,
        "executor_build": BUILD,
        "plugin_build": DIGEST,
        "policy_digest": DIGEST,
        "permission": "tasks.write",
        "effect": "create",
        "target": {"id": "task:42", "base_revision": "r7"},
        "destination": "tasks",
        "content": {"title": "Buy milk"},
        "sources": ["message:123"],
        "expires_at": format_utc(SPEC_EXPIRES),
    }
    spec.update(changes)
    spec.setdefault("schema_digest", schema_digest_for(spec["capability"]))
    return spec


@dataclass
class World:
    """A directory with one approvable actor, and helpers to propose and present."""

    store: LedgerStore
    clock: FixedClock = field(default_factory=FixedClock)
    actor: str = "alice"
    who: Provenance = field(default_factory=lambda: Provenance("alice", "ib1", "cb1", "conv-1"))
    registry: StaticExecutorRegistry | None = None

    def __post_init__(self) -> None:
        self.executors: list[ForbiddenExecutor] = []
        if self.registry is None:
            self.registry, self.executors = forbidden_registry()
        self.tokens = RecordingTokens()
        self.ctx = ServiceContext(
            store=self.store,
            clock=self.clock,
            tokens=self.tokens,
            permissions=frozenset({"tasks.write", "social.post"}),
            registry=self.registry,
        )
        self.put(DirectoryKind.ACTOR, actor_record_id("alice"), enabled=True)
        self.put(DirectoryKind.ACTOR, actor_record_id("bob"), enabled=True)
        self.put(
            DirectoryKind.IDENTITY_BINDING,
            identity_binding_record_id("ib1"),
            actor_id="alice",
            channel="slack",
            external_id="U1",
            active=True,
        )
        self.put(
            DirectoryKind.IDENTITY_BINDING,
            identity_binding_record_id("ib-bob"),
            actor_id="bob",
            channel="slack",
            external_id="U2",
            active=True,
        )
        self.put(
            DirectoryKind.CHANNEL_BINDING,
            channel_binding_record_id("cb1"),
            conversation_key="conv-1",
            channel="slack",
            active=True,
        )
        self.put(
            DirectoryKind.CHANNEL_BINDING,
            channel_binding_record_id("cb2"),
            conversation_key="conv-2",
            channel="slack",
            active=True,
        )
        for actor in ("alice", "bob"):
            self.put(
                DirectoryKind.PERMISSION_GRANT, grant_record_id(actor, "tasks.write"), granted=True
            )
        for capability, mode in FAKE_CAPABILITIES.items():
            self.put(
                DirectoryKind.EXECUTOR_BUILD,
                executor_build_record_id(capability, fake_build_digest(capability)),
                delivery_mode=mode.value,
                available=True,
            )
        self.put(DirectoryKind.TARGET, target_record_id("task:42"), revision="r7")

    def put(self, kind: DirectoryKind, record_id: str, **values: Any) -> None:
        put_record(self.store, self.clock, kind=kind, record_id=record_id, values=values)

    def propose(self, **changes: Any) -> str:
        return propose(self.ctx, actor_id=self.actor, spec_data=base_spec(**changes)).proposal_id

    def present(self, proposal_id: str, version: int = 1, **overrides: Any) -> PresentationResult:
        args: dict[str, Any] = {
            "identity_binding_id": "ib1",
            "channel_binding_id": "cb1",
            "conversation_key": "conv-1",
        }
        args.update(overrides)
        return present(self.ctx, proposal_id=proposal_id, version=version, **args)

    def executor_calls(self) -> int:
        return sum(e.calls for e in self.executors)


def check_approval_invariants(store: LedgerStore, proposal_ids: list[str], now: datetime) -> None:
    """I1-I3 read from the raw store for the given proposals."""
    for proposal_id in proposal_ids:
        proposal = store.get(Proposal, proposal_id)
        if proposal is None:
            assert not store.read_stream(proposal_id)
            continue  # refused before anything was stored (a policy forbade it)
        for number, record in proposal.versions.items():
            attempt_id = derive_attempt_id(proposal_id, number, record["payload_hash"])
            stored = store.read_stream(attempt_id)
            consumed = [
                pid
                for pid, p in proposal.presentations.items()
                if p["version"] == number and p["status"] == PresentationStatus.CONSUMED.value
            ]
            votes = len(record.get("votes", []))
            if record["status"] == ProposalStatus.CLAIMED.value:
                # I1/I3: exactly one attempt, queued first, for the claimed version
                assert record["attempt_id"] == attempt_id
                assert stored, "claimed proposal without its attempt"
                assert stored[0].originator_version == 1
                assert stored[0].topic.endswith("ExecutionAttempt.Queued")
                attempt = store.get(ExecutionAttempt, attempt_id)
                assert attempt is not None
                assert attempt.proposal_id == proposal_id
                assert attempt.proposal_version == number
                # I2: exactly one consumed presentation, no active sibling left; a
                # version the ledger claimed itself (a policy, a standing grant)
                # consumed none
                kind = kind_of(record.get("approval"))
                by_person = needs_channel(kind) or kind is ApprovalKind.QUORUM
                assert len(consumed) == votes + (1 if by_person else 0), (kind, consumed)
                assert not proposal.active_presentation_ids(number)
                assert kind_of(attempt.approval) is kind
            elif record["status"] == ProposalStatus.DECLINED.value:
                # a decline consumes exactly one presentation, revokes the rest, queues nothing
                assert not stored, "attempt for a declined proposal version"
                assert len(consumed) == votes + 1
                assert not proposal.active_presentation_ids(number)
            else:
                assert not stored, "attempt for an unclaimed proposal version"
                # only a quorum member's recorded vote consumes one before a decision
                assert len(consumed) == votes, "consumed presentation without a decision"
