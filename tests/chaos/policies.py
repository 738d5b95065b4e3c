"""Policy changes and standing grants in the simulation (issue 28), and the
oracle's own checks of I14 and I15 from the raw store.

- ``policy``: an admin applies one of a few Cedar policy sets (none, auto-approve
  small tasks, forbid deletions, forbid big ones), while proposals, approvals
  and workers run;
- ``grant`` / ``revoke``: an admin gives alice a standing grant with a small
  maximum (1-3 uses), or revokes one;
- three of the sets ask two members of "finance" for proposals of size 3-4: the
  proposer presents to members too, each votes through their own token, and
  one member can be disabled or leave the group between votes.

The oracle (independently of ``authorization.py``, evaluating the policy set
itself with ``domain.policy``): no claim and no dispatch marker commits while
the policy set in force forbids the proposal (I15); no standing grant's streams
(its record, its use shards and their fences, read back raw by
``tests.support.grant_checks``) ever record a use beyond a shard's quota or the
grant's maximum or after its expiry, and every use is the claim of exactly one
proposal version; and no use and no dispatch marker of an attempt a grant
approved commits after the commit that revoked it (I14, judged on the order of
commits the simulation sees);
no claim without M distinct counted members, none the requester, each earlier
vote recorded, M what the set in force asks, and no single approval of what
needs a quorum (I13).
"""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

from adapters.store import LedgerStore
from domain.approvals import ApprovalKind, kind_of
from domain.attempt import ExecutionAttempt
from domain.directory import (
    POLICY_SET_RECORD_ID,
    DirectoryKind,
    DirectoryRecord,
    actor_record_id,
)
from domain.policy import PolicyRequest, Verdict, compiled, evaluate, policy_set_digest
from domain.proposal import Proposal
from domain.services import grants
from domain.services.context import ServiceContext
from domain.services.policies import apply_policy_set
from domain.spec import parse_spec, parse_utc
from tests.chaos.escalations import ESCALATING_SETS
from tests.chaos.wrappers import ChaosStore
from tests.support.clocks import FixedClock
from tests.support.grant_checks import grant_violations
from tests.support.stream_checks import expect

SMALL = """@id("small") @auto_approve
permit (principal, action == Action::"fake.provider_idempotency", resource)
when { context.content has size && context.content.size <= 2 };
"""
NO_DELETIONS = """@id("no-deletions") forbid (principal, action, resource)
when { context.effect == "delete" };
"""
NO_BIG = """@id("no-big") forbid (principal, action, resource)
when { context.content has size && context.content.size >= 5 };
"""
PAIR = """@id("pair") @quorum("2") @group("finance")
permit (principal, action, resource)
when { context.content has size && (context.content.size == 3 || context.content.size == 4) };
"""
POLICY_SETS = (
    "",
    SMALL + NO_DELETIONS,
    NO_DELETIONS + NO_BIG,
    SMALL + NO_BIG,
    SMALL + PAIR,
    NO_DELETIONS + PAIR,
    NO_BIG + PAIR,
    *ESCALATING_SETS,
    *ESCALATING_SETS,  # twice: an escalation needs the set in force and the clock moved
)
ADMIN = grants.Grantor("admin", "ops")


def plant_grant_over_max() -> None:
    """Test-only switch: a use shard that gives one use more than its quota, so a
    grant's uses can pass its maximum."""
    from domain.services import grant_shards

    grant_shards.has_room = lambda uses, quota: uses <= quota  # type: ignore[assignment]


def plant_double_vote() -> None:
    """Test-only switch: a member's second vote (through a second presentation) is
    no longer recognized as theirs, so one member can be counted twice."""
    from domain.services import quorum

    quorum.already_voted = lambda votes, actor_id: False  # type: ignore[assignment]


def plant_ignore_forbid() -> None:
    """Test-only switch: approval and the worker's recheck no longer look at forbids."""
    from domain.policy import NO_POLICIES
    from domain.services import authorization

    authorization._policy_verdict = lambda *args, **kwargs: NO_POLICIES  # type: ignore[assignment]


class PolicyActions:
    """Mixed into :class:`~tests.chaos.sim.Simulation`."""

    # provided by the simulation
    rng: random.Random
    clock: FixedClock
    store: LedgerStore
    chaos: ChaosStore
    ctx: ServiceContext
    counts: dict[str, int]
    grant_ids: list[str]
    revoked_grants: set[str]

    def count(self, name: str) -> None:
        raise NotImplementedError

    def policy_digest(self) -> str:
        """What a proposer sends: the current set's digest (GET /policies), or now
        and then a stale one."""
        record = self.store.get(DirectoryRecord, POLICY_SET_RECORD_ID)
        current = str(record.values.get("digest", "")) if record else ""
        if not current or self.rng.random() < 0.05:
            return policy_set_digest(self.rng.choice(POLICY_SETS) or "none")
        return current

    def do_policy(self) -> str | None:
        text = self.rng.choice(POLICY_SETS)
        view = apply_policy_set(self.chaos, self.clock, text)
        self.count(f"policy:{'changed' if view.changed else 'unchanged'}")
        return f"policy set v{view.version} {[p['id'] for p in view.policies]}"

    def do_grant(self) -> str | None:
        bounds: dict[str, Any] = {
            "capability": self.rng.choice(("fake.provider_idempotency", "fake.correlation_lookup")),
            "max_uses": self.rng.randint(1, 3),
            "expires_at": (
                self.clock.now() + timedelta(seconds=self.rng.choice((120, 3600, 86400)))
            ).isoformat(),
        }
        if self.rng.random() < 0.5:
            bounds["conditions"] = [{"field": "size", "op": "lte", "value": self.rng.randint(1, 4)}]
        made = grants.grant(self.ctx, actor_id="alice", bounds=bounds, grantor=ADMIN)
        self.grant_ids.append(str(made["grant_id"]))
        return f"{made['grant_id']} {bounds['capability']} max {bounds['max_uses']}"

    def do_revoke(self) -> str | None:
        if not self.grant_ids:
            return "no grant"
        grant_id = self.rng.choice(self.grant_ids)
        done = grants.revoke(self.ctx, grant_id=grant_id, grantor=ADMIN)
        return f"{grant_id} {done['state']}"

    # -- the oracle's own checks ------------------------------------------------

    def check_not_forbidden(self, attempt: ExecutionAttempt, when: str) -> None:
        """I15 from the raw store: the policy set as committed does not forbid it."""
        record = self.store.get(DirectoryRecord, POLICY_SET_RECORD_ID)
        text = str(record.values.get("text", "")) if record else ""
        if not text.strip():
            return
        proposal = self.store.get(Proposal, attempt.proposal_id)
        assert proposal is not None
        spec = parse_spec(proposal.versions[attempt.proposal_version]["spec"])
        actor = self.store.get(DirectoryRecord, actor_record_id(attempt.actor_id))
        groups = tuple(actor.values.get("groups", ())) if actor else ()
        decided = attempt.dispatch_started_at if when == "dispatch" else attempt.created_at
        assert decided is not None
        request = PolicyRequest.of(attempt.actor_id, groups, spec, parse_utc(decided))
        decision = evaluate(compiled(text), request)
        expect(
            decision.verdict is not Verdict.DENIED,
            f"{attempt.id}: {when} committed while policy {decision.policy_ids} forbids it (I15)",
        )
        if when == "approval" and kind_of(attempt.approval) is not ApprovalKind.QUORUM:
            expect(
                decision.verdict is not Verdict.QUORUM,
                f"{attempt.id}: claimed by one approval where {decision.policy_ids} ask a quorum",
            )
        if when == "approval" and kind_of(attempt.approval) is ApprovalKind.POLICY:
            expect(
                decision.verdict is Verdict.AUTO_APPROVE,
                f"{attempt.id}: claimed by a policy that does not approve it",
            )

    def check_quorum(self, attempt: ExecutionAttempt) -> None:
        """I13 from the raw store: a quorum claim counts M distinct members, none of
        them the requesting actor, each vote but the deciding one recorded on the
        version, M being what the policy set in force asks for."""
        approval = attempt.approval or {}
        approvers = list(approval.get("approvers", []))
        required = int(approval.get("required", 0))
        expect(
            len(set(approvers)) == len(approvers),
            f"{attempt.id}: a member counted twice {approvers} (I13)",
        )
        expect(len(approvers) == required, f"{attempt.id}: {approvers} are not {required} (I13)")
        expect(attempt.actor_id not in approvers, f"{attempt.id}: the requester counted (I13)")
        proposal = self.store.get(Proposal, attempt.proposal_id)
        assert proposal is not None
        voted = {v["actor_id"] for v in proposal.votes(attempt.proposal_version)}
        expect(
            set(approvers[:-1]) <= voted,
            f"{attempt.id}: counted {approvers[:-1]} without their recorded votes (I13)",
        )
        record = self.store.get(DirectoryRecord, POLICY_SET_RECORD_ID)
        text = str(record.values.get("text", "")) if record else ""
        spec = parse_spec(proposal.versions[attempt.proposal_version]["spec"])
        actor = self.store.get(DirectoryRecord, actor_record_id(attempt.actor_id))
        groups = tuple(actor.values.get("groups", ())) if actor else ()
        if "escalated" in proposal.versions[attempt.proposal_version]:
            return  # the fallback group's quorum: check_escalated_claim
        request = PolicyRequest.of(attempt.actor_id, groups, spec, parse_utc(attempt.created_at))
        decision = evaluate(compiled(text), request) if text.strip() else None
        asked = decision.quorum.required if decision and decision.quorum else 0
        expect(asked == required, f"{attempt.id}: claimed by {required} where {asked} are asked")

    def check_grants(self) -> None:
        """I14 from the raw store, for every grant made so far."""
        for grant_id in self.grant_ids:
            problems = grant_violations(self.store, grant_id)
            expect(not problems, f"{'; '.join(problems)} (I14)")

    def grant_commit(self, pending: Any) -> None:
        """I14 on the order of commits, right after each one: no use of a revoked
        grant (on its record or one of its use shards) and no dispatch marker of an
        attempt it approved commits after the commit that revoked it."""
        for aggregate, kinds in pending:
            if not isinstance(aggregate, DirectoryRecord):
                continue
            grant_id = str(aggregate.values.get("grant_id", ""))
            if "Used" in kinds:
                expect(
                    grant_id not in self.revoked_grants,
                    f"{grant_id}: used after its revocation (I14)",
                )
            if aggregate.kind is DirectoryKind.STANDING_GRANT and aggregate.values.get("revoked"):
                self.revoked_grants.add(grant_id)

    def check_marker_grant(self, attempt: ExecutionAttempt) -> None:
        approval = attempt.approval or {}
        if kind_of(approval) is ApprovalKind.GRANT:
            grant_id = approval.get("grant_id")
            expect(
                grant_id not in self.revoked_grants,
                f"{attempt.id}: dispatched after its grant {grant_id} was revoked (I14)",
            )
