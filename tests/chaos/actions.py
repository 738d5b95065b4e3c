"""The actions a schedule picks from: everyone who touches the ledger."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from adapters.executors.fake import EffectLedger, fake_build_digest
from adapters.store import LedgerStore
from domain.attempt import ExecutionAttempt
from domain.directory import DirectoryRecord, target_record_id
from domain.errors import StoreUnavailable
from domain.proposal import Proposal
from domain.services.approval import Provenance, approve
from domain.services.context import ServiceContext
from domain.services.directory import put_record
from domain.services.execution import Worker
from domain.services.proposals import present, propose
from domain.services.recovery import run_recovery
from domain.services.resolution import reconcile, resolve
from domain.spec import derive_attempt_id, format_utc
from projections.projector import Projector
from tests.chaos.interleave import Actor
from tests.chaos.oracle import Oracle
from tests.chaos.world import (
    CAPABILITIES,
    DIRECTORY,
    GOOD,
    LEASE,
    POLICY,
    SIMULATE,
    STRANGERS,
    VOTERS,
    SeededTokens,
)
from tests.chaos.wrappers import ChaosStore
from tests.support.clocks import FixedClock
from tests.support.factories import schema_digest_for
from tests.support.stream_checks import expect
from tests.support.worlds.approval import DIGEST


class Actions:
    """Mixed into :class:`~tests.chaos.sim.Simulation`; each ``do_*`` is one actor's job."""

    # provided by the simulation
    rng: random.Random
    clock: FixedClock
    store: LedgerStore
    chaos: ChaosStore
    ctx: ServiceContext
    tokens: SeededTokens
    workers: list[Worker]
    projector: Projector
    oracle: Oracle
    proposals: list[str]
    attempts: list[str]
    presentations: list[str]
    presented: dict[str, tuple[str, Provenance]]
    used_tokens: list[str]
    deliveries: list[str]
    projection_hints: list[str]
    actors: list[Actor]
    effects: EffectLedger
    admin_saw: dict[str, int]
    credential_rotated: bool

    def count(self, name: str) -> None:
        raise NotImplementedError

    def maybe_read_fault(self) -> None:
        raise NotImplementedError

    def pick(self) -> tuple[str, Callable[[], str | None]]:
        have_attempts = 3 if self.attempts else 0
        # While a call overruns, recovery is what can misread it: look more often.
        overrunning = any(a.parked_at == "executor_overrun" and not a.done for a in self.actors)
        table: list[tuple[int, str, Callable[[], str | None]]] = [
            (8 if len(self.open_proposals()) < 2 else 3, "propose", self.do_propose),
            (
                8 if len(self.presentations) < 2 * len(self.proposals) else 3,
                "present",
                self.do_present,
            ),
            (10 if self.presentations else 1, "approve", self.do_approve),
            (14 if self.deliveries else 1, "deliver", self.do_deliver),
            (20 if overrunning else 5, "recover", self.do_recover),
            (7, "clock", self.do_clock),
            (2, "directory", self.do_directory),
            (4 if self.credential_rotated else 1, "credentials", self.do_credentials),
            (have_attempts, "reconcile", self.do_reconcile),
            (have_attempts, "resolve", self.do_resolve),
            (3 if self.projection_hints else 0, "project", self.do_project),
            (
                6 if self.landings else (2 if self.overdue else 0),  # type: ignore[attr-defined]
                "land",
                self.do_land,  # type: ignore[attr-defined]
            ),
            (2, "policy", self.do_policy),  # type: ignore[attr-defined]
            (3, "vote", self.do_vote),
            (2, "grant", self.do_grant),  # type: ignore[attr-defined]
            (1, "revoke", self.do_revoke),  # type: ignore[attr-defined]
            (3, "escalate", self.do_escalate),  # type: ignore[attr-defined]
        ]
        total = sum(weight for weight, _, _ in table)
        roll = self.rng.randrange(total)
        for weight, name, action in table:
            if roll < weight:
                return name, action
            roll -= weight
        raise AssertionError("unreachable")

    def do_propose(self) -> str | None:
        capability = self.rng.choice(CAPABILITIES)
        spec: dict[str, Any] = {
            "capability": capability,
            "executor_build": fake_build_digest(capability),
            "plugin_build": DIGEST,
            "schema_digest": schema_digest_for(capability),
            "policy_digest": self.policy_digest(),  # type: ignore[attr-defined]
            "permission": "tasks.write",
            "effect": "delete" if self.rng.random() < 0.1 else "create",
            "destination": "tasks",
            "content": {
                "title": f"item {self.rng.randrange(1000)}",
                "simulate": self.rng.choice(SIMULATE),
                "size": self.rng.choice((1, 2, 3, 3, 4, 4, 5, 6)),
            },
            "sources": ["message:1"],
            "expires_at": format_utc(
                self.clock.now() + timedelta(seconds=self.rng.choice((600, 3600, 86400)))
            ),
        }
        if self.rng.random() < 0.5:
            spec["target"] = {"id": "task:42", "base_revision": self.target_revision()}
        lineage = None
        expected = None
        if self.proposals and self.rng.random() < 0.3:
            lineage = self.rng.choice(self.proposals)
            if self.rng.random() < 0.5:
                found = self.store.get(Proposal, lineage)
                expected = found.current_version if found else None
        result = propose(
            self.ctx,
            actor_id="alice",
            spec_data=spec,
            lineage_id=lineage,
            expected_version=expected,
        )
        if result.approval is not None:
            self.count(f"claimed:{result.approval['kind']}")
        return (
            f"{result.proposal_id} v{result.version} {capability} {spec['content']['simulate']}"
            f" {result.status}"
        )

    def target_revision(self) -> str:
        record = self.store.get(DirectoryRecord, target_record_id("task:42"))
        current = record.text("revision") if record else "r7"
        return current if self.rng.random() < 0.85 else ("r8" if current == "r7" else "r7")

    def open_proposals(self) -> list[str]:
        """Proposals whose current version can still be presented and claimed."""
        found = []
        for proposal_id in self.proposals:
            state = self.oracle.live[proposal_id]  # as last committed
            if state["versions"][state["current_version"]]["status"] == "presented":
                found.append(proposal_id)
        return found

    def quorum_sized(self, proposal_id: str) -> bool:
        """Whether the current version is one the simulation's quorum policy is
        about, or one that escalated (its fallback group's members vote on it)."""
        found = self.store.get(Proposal, proposal_id)
        if found is None:
            return False
        record = found.versions[found.current_version]
        return record["spec"]["content"].get("size") in (3, 4) or "escalated" in record

    def do_present(self) -> str | None:
        if not self.proposals:
            return "nothing to present"
        candidates = self.open_proposals()
        roll = self.rng.random()
        # a quorum member's own presentation now and then (refused unless a policy
        # asks this version for a quorum), mostly of a proposal a quorum policy
        # may hold for; else the proposal's actor's
        sized = [p for p in candidates if self.quorum_sized(p)]
        member = self.rng.choice(VOTERS) if roll < (0.5 if sized else 0.1) else None
        if member is not None and sized:
            candidates = sized
        if not candidates or self.rng.random() < 0.15:
            candidates = self.proposals
        proposal_id = self.rng.choice(candidates)
        found = self.store.get(Proposal, proposal_id)
        assert found is not None
        version = (
            found.current_version if self.rng.random() < 0.9 else max(1, found.current_version - 1)
        )
        binding = member or (GOOD if roll < 0.87 else STRANGERS[0])
        shown = present(
            self.ctx,
            proposal_id=proposal_id,
            version=version,
            identity_binding_id=binding.identity_binding_id,
            channel_binding_id=binding.channel_binding_id,
            conversation_key=binding.conversation_key,
            ttl_seconds=self.rng.choice((60, 600, 1800, 1800)),
            actor_id=member.actor_id if member else None,
        )
        self.presentations.append(shown.token)
        # A presentation binds its actor (the proposal's, or the member's) to the
        # ids it was shown through.
        self.presented[shown.token] = (
            proposal_id,
            Provenance(
                member.actor_id if member else found.actor_id,
                binding.identity_binding_id,
                binding.channel_binding_id,
                binding.conversation_key,
            ),
        )
        return f"{shown.presentation_id} for {proposal_id} v{version}" + (
            f" to {member.actor_id}" if member else ""
        )

    def do_approve(self) -> str | None:
        roll = self.rng.random()
        if roll < 0.05 or not self.presentations:
            token = self.tokens.new_token()  # unknown token
            proposal_id, binding = "", GOOD
        else:
            pool = self.presentations
            if roll < 0.25 and self.used_tokens:
                pool = self.used_tokens  # a duplicate approval
            elif roll < 0.75:
                pool = self.presentations[-3:]  # the freshest presentations
            token = self.rng.choice(pool)
            proposal_id, binding = self.presented[token]
        who = binding if self.rng.random() < 0.85 else self.rng.choice(STRANGERS)
        return self.approve_token(token, proposal_id, binding, who)

    def do_vote(self) -> str | None:
        """A quorum member is shown a proposal a quorum policy may hold for and
        answers at once (another member's provenance now and then)."""
        sized = [p for p in self.open_proposals() if self.quorum_sized(p)]
        if not sized:
            return "nothing for a quorum"
        proposal_id = self.rng.choice(sized)
        found = self.store.get(Proposal, proposal_id)
        assert found is not None
        member = self.rng.choice(VOTERS)
        shown = present(
            self.ctx,
            proposal_id=proposal_id,
            version=found.current_version,
            identity_binding_id=member.identity_binding_id,
            channel_binding_id=member.channel_binding_id,
            conversation_key=member.conversation_key,
            actor_id=member.actor_id,
        )
        self.presentations.append(shown.token)
        self.presented[shown.token] = (proposal_id, member)
        who = member if self.rng.random() < 0.9 else self.rng.choice(VOTERS)
        return self.approve_token(shown.token, proposal_id, member, who)

    def approve_token(
        self, token: str, proposal_id: str, binding: Provenance, who: Provenance
    ) -> str | None:
        """Approve ``token`` as ``who`` and judge the answer (``binding``: whom the
        presentation is for)."""
        result = approve(self.ctx, token=token, provenance=who)
        expect(bool(proposal_id), "an unknown token was approved")
        expect(who == binding, "an approval succeeded through another caller's provenance")
        if token not in self.used_tokens:
            self.used_tokens.append(token)
        if result.status == "vote_recorded":
            expect(result.attempt_id is None, "a vote answered with an attempt")
            expect(
                0 < (result.votes or 0) < (result.required or 0),
                f"a vote answered {result.votes} of {result.required}",
            )
            self.count("claimed:vote_recorded")
            return f"vote {result.votes}/{result.required}"
        attempt = self.store.get(ExecutionAttempt, str(result.attempt_id))
        expect(
            attempt is not None and attempt.proposal_id == proposal_id,
            "approval answered with an attempt of another proposal",
        )
        assert attempt is not None
        expect(
            result.attempt_id
            == derive_attempt_id(proposal_id, attempt.proposal_version, attempt.payload_hash),
            "approval answered with a non-derived attempt id (I1)",
        )
        if attempt.approval is not None and attempt.approval["kind"] == "quorum":
            self.count("claimed:quorum")
        return f"{str(result.attempt_id)[:16]} rev {result.attempt_revision}"

    def do_deliver(self) -> str | None:
        if not self.deliveries:
            return "stream idle"
        index = self.rng.randrange(len(self.deliveries))
        attempt_id = self.deliveries[index]
        roll = self.rng.random()
        if roll < 0.1:
            del self.deliveries[index]
            self.count("stream:lost")
            return f"record for {attempt_id[:16]} lost (a)"
        if roll < 0.35:
            self.count("stream:redelivered")
        else:
            del self.deliveries[index]
        worker = self.rng.randrange(len(self.workers))
        outcome = self.workers[worker].process(attempt_id)
        return f"worker {worker} {attempt_id[:16]} -> {outcome.value}"

    def do_recover(self) -> str | None:
        worker = self.rng.randrange(len(self.workers))
        report = run_recovery(self.workers[worker], page_size=self.rng.choice((1, 2, 100)))
        expect(not report.outcomes.get("error"), f"recovery raised on an attempt: {report}")
        return f"worker {worker} examined {report.examined} {dict(sorted(report.outcomes.items()))}"

    def do_clock(self) -> str | None:
        roll = self.rng.random()
        if roll < 0.5:
            seconds = self.rng.randint(1, 20)
        elif roll < 0.9:
            seconds = LEASE + self.rng.randint(0, 30)
            self.count("clock:past_lease")
        else:
            seconds = POLICY.backoff_max_seconds + self.rng.randint(1, 600)
            self.count("clock:big_jump")
        self.clock.advance(seconds)
        return f"+{seconds}s"

    def do_directory(self) -> str | None:
        kind, record_id, good, wrong = self.rng.choice(DIRECTORY)
        values = good if self.rng.random() < 0.7 else self.rng.choice(wrong)
        put_record(self.chaos, self.clock, kind=kind, record_id=record_id, values=values)
        return f"{record_id} {values}"

    def do_credentials(self) -> str | None:
        """The provider's credential is rotated (it refuses every request with a 401,
        writing nothing), or the ledger is given the new one."""
        self.credential_rotated = not self.credential_rotated
        self.count("credential:rotated" if self.credential_rotated else "credential:restored")
        return "rotated: the provider answers 401" if self.credential_rotated else "restored"

    def pick_attempt(self) -> ExecutionAttempt | None:
        if not self.attempts:
            return None
        attempt = self.store.get(ExecutionAttempt, self.rng.choice(self.attempts))
        assert attempt is not None
        return attempt

    def do_reconcile(self) -> str | None:
        attempt = self.pick_attempt()
        if attempt is None:
            return "no attempt"
        revision = attempt.revision - (1 if self.rng.random() < 0.2 else 0)
        # I6: an executor call made while this actor runs fails check_call
        settled = reconcile(self.ctx, attempt_id=attempt.id, expected_revision=revision)
        return f"{attempt.id[:16]} -> {settled.status.value}"

    def do_resolve(self) -> str | None:
        attempt = self.pick_attempt()
        if attempt is None:
            return "no attempt"
        revision = attempt.revision - (1 if self.rng.random() < 0.2 else 0)
        outcome = self.rng.choice(("effect_applied", "no_effect"))
        if outcome == "no_effect":
            # What "checked the provider console" showed (the verdict may still be wrong).
            seen = self.effects.effect_count(attempt.idempotency_key)
            self.admin_saw[attempt.id] = max(self.admin_saw.get(attempt.id, 0), seen)
        settled = resolve(
            self.ctx,
            attempt_id=attempt.id,
            expected_revision=revision,
            outcome=outcome,
            reason="checked the provider console",
            resolved_by="ops",
        )
        return f"{attempt.id[:16]} {outcome} -> {settled.status.value}"

    def do_project(self) -> str | None:
        moved = 0
        hints = self.projection_hints
        self.projection_hints = []
        self.rng.shuffle(hints)
        for index, attempt_id in enumerate(hints):
            if self.rng.random() < 0.2:
                self.projection_hints.append(attempt_id)  # redelivered later
            try:
                self.maybe_read_fault()
                moved += self.projector.project_attempt(attempt_id)
            except StoreUnavailable:
                self.projection_hints.extend(hints[index:])  # a consumer keeps its place
                raise
        return f"{moved} views moved"

    # -- the run ---------------------------------------------------------------
