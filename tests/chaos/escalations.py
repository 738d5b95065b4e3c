"""Escalation in the simulation (issue 28), and the oracle's own checks of it
from the raw store.

- three of the policy sets mark a permit ``@escalate_to("leads")``: the finance
  pair for sizes 3-4 (``@escalate_before("50m")``: a proposal expiring in 10
  minutes is due at once, one in an hour after a big clock jump), and a
  person's approval for size 6 (``"8m"``);
- ``escalate``: the housekeeping pass (the escalation watch view, projected from
  the proposals, names the candidates; ``escalate_if_due`` decides each one),
  racing approvals, votes, presentations, policy changes and other passes; the
  clock moves it into a version's lead time;
- the leads are m3 (also in finance) and l1; after an escalation they are
  presented the version and vote on it like any quorum member.

The oracle, from each proposal's stored events and the policy set as
committed: a version escalates at most once, only while presented and within
the lead time of a policy in force that names the group; no vote and no claim
goes through a presentation made before the version escalated (Escalated
revoked it); a claim of an escalated version is the fallback group's quorum
(as many members as were asked, one for a single approval), every counted
voter an enabled member of that group and none the requester.
"""

from __future__ import annotations

import random
from typing import Any

from adapters.store import LedgerStore
from domain.approvals import ApprovalKind, kind_of
from domain.attempt import ExecutionAttempt
from domain.directory import POLICY_SET_RECORD_ID, DirectoryRecord, actor_record_id
from domain.policy import PolicyRequest, compiled, evaluate
from domain.proposal import Proposal
from domain.services.context import ServiceContext
from domain.services.escalation import escalate_if_due
from domain.spec import parse_spec, parse_utc
from projections.audit import event_type
from projections.escalation_watch import due_for_escalation
from projections.ports import ViewStore
from projections.projector import Projector
from tests.support.clocks import FixedClock
from tests.support.stream_checks import expect

FALLBACK = "leads"
PAIR_ESCALATING = """@id("pair") @quorum("2") @group("finance")
@escalate_to("leads") @escalate_before("50m")
permit (principal, action, resource)
when { context.content has size && (context.content.size == 3 || context.content.size == 4) };
"""
LATE = """@id("late") @escalate_to("leads") @escalate_before("8m")
permit (principal, action, resource)
when { context.content has size && context.content.size == 6 };
"""
ESCALATING_SETS = (
    PAIR_ESCALATING + LATE,
    PAIR_ESCALATING,
    LATE,
)
# What ends a version's presented life (no escalation after one of these).
_DECIDED = {"Claimed", "Declined", "Canceled", "Conflicted"}


def plant_escalation_keeps_presentations() -> None:
    """Test-only switch: ``Escalated`` revokes nothing, so a presentation made
    before the escalation (the requester's, a member's) can still decide it."""

    def keeps(
        self: Proposal, *, version: int, group: str, policy_id: str, now: Any, at: str
    ) -> bool:
        if "escalated" in self.versions[version]:
            return False
        self._escalated(version=version, group=group, policy_id=policy_id, revoked=[], at=at)
        return True

    Proposal.escalate = keeps  # type: ignore[method-assign]


class EscalationActions:
    """Mixed into :class:`~tests.chaos.sim.Simulation`."""

    # provided by the simulation
    rng: random.Random
    clock: FixedClock
    store: LedgerStore
    views: ViewStore
    ctx: ServiceContext
    projector: Projector
    proposals: list[str]

    def count(self, name: str) -> None:
        raise NotImplementedError

    def escalated(self, proposal_id: str) -> bool:
        """Whether the current version of a proposal has escalated."""
        found = self.store.get(Proposal, proposal_id)
        return found is not None and "escalated" in found.versions[found.current_version]

    def do_escalate(self) -> str | None:
        """One housekeeping pass's escalation step (``adapters.housekeeping``)."""
        for proposal_id in self.proposals:
            self.projector.project_proposal(proposal_id)
        due = list(due_for_escalation(self.views, self.clock.now(), 200))
        done = [p for p in due if escalate_if_due(self.ctx, p)]
        self.count(f"escalation:{'appended' if done else 'none'}")
        return f"{len(due)} watched, escalated {done}"

    # -- the oracle's own checks ------------------------------------------------

    def check_escalations(self, proposal_id: str) -> None:
        """The stored events of one proposal, in order (module docstring)."""
        shown: dict[int, set[str]] = {}  # version -> presentations made so far
        before: dict[int, set[str]] = {}  # escalated version -> presentations made before
        ended: set[int] = set()
        stream = self.store.read_stream(proposal_id)
        for stored in stream:
            event = self.store.mapper.to_domain_event(stored)
            kind = event_type(event)
            data = event.data()
            version = data.get("version")
            if kind == "Presented":
                shown.setdefault(int(data["version"]), set()).add(str(data["presentation_id"]))
            elif kind == "Escalated":
                number = int(data["version"])
                expect(number not in before, f"{proposal_id} v{number}: escalated twice")
                expect(number not in ended, f"{proposal_id} v{number}: escalated once decided")
                before[number] = set(shown.get(number, set()))
            elif kind in ("VoteRecorded", "Claimed") and version in before:
                used = data.get("presentation_id")
                expect(
                    used is None or used not in before[int(version)],
                    f"{proposal_id} v{version}: {kind} through {used}, a presentation "
                    "revoked by Escalated",
                )
            if kind in _DECIDED and version is not None:
                ended.add(int(version))
            if kind == "Revised":
                ended.update(range(1, int(data["version"])))  # superseded

    def check_escalated_when_due(self, proposal: Proposal) -> None:
        """Right after an ``Escalated`` commit: the policy set in force asks this
        version's escalation, to this group, and its lead time has come."""
        number = proposal.current_version
        record = proposal.versions[number]
        escalated = record["escalated"]
        decision = self.decision_for(proposal, number, parse_utc(escalated["at"]))
        rule = decision.escalation if decision is not None else None
        expect(
            rule is not None and rule.group == escalated["group"],
            f"{proposal.id} v{number}: escalated to {escalated['group']} with no policy asking",
        )
        assert rule is not None
        expires = parse_utc(proposal.expiry_of(number))
        expect(
            rule.due(expires, parse_utc(escalated["at"])),
            f"{proposal.id} v{number}: escalated at {escalated['at']} outside its lead time "
            f"(expiry {proposal.expiry_of(number)})",
        )

    def check_escalated_claim(self, attempt: ExecutionAttempt) -> None:
        """Right after the claim of an escalated version: the fallback group's
        quorum, counted from enabled members of that group, none the requester."""
        proposal = self.store.get(Proposal, attempt.proposal_id)
        assert proposal is not None
        record = proposal.versions[attempt.proposal_version]
        escalated = record.get("escalated")
        if escalated is None:
            return
        approval = attempt.approval or {}
        where = f"{attempt.id}: claim of an escalated version"
        expect(
            kind_of(attempt.approval) is ApprovalKind.QUORUM,
            f"{where} by a {approval.get('kind', 'human')} approval",
        )
        expect(approval.get("group") == escalated["group"], f"{where} by {approval.get('group')}")
        decision = self.decision_for(
            proposal, attempt.proposal_version, parse_utc(attempt.created_at)
        )
        asked = decision.quorum.required if decision and decision.quorum else 1
        approvers = list(approval.get("approvers", []))
        expect(
            len(set(approvers)) == len(approvers) == int(approval.get("required", 0)) == asked,
            f"{where}: counted {approvers} of {approval.get('required')}, {asked} asked",
        )
        for approver in approvers:
            actor = self.store.get(DirectoryRecord, actor_record_id(approver))
            values = actor.values if actor else {}
            expect(
                approver != attempt.actor_id
                and bool(values.get("enabled"))
                and escalated["group"] in values.get("groups", ()),
                f"{where}: counted {approver}, not an enabled member of {escalated['group']}",
            )

    def decision_for(self, proposal: Proposal, number: int, when: Any) -> Any:
        """The policy set as committed, evaluated for the version's requester."""
        policy = self.store.get(DirectoryRecord, POLICY_SET_RECORD_ID)
        text = str(policy.values.get("text", "")) if policy else ""
        if not text.strip():
            return None
        spec = parse_spec(proposal.versions[number]["spec"])
        actor = self.store.get(DirectoryRecord, actor_record_id(proposal.actor_id))
        groups = tuple(actor.values.get("groups", ())) if actor else ()
        return evaluate(compiled(text), PolicyRequest.of(proposal.actor_id, groups, spec, when))
