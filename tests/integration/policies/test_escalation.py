"""Escalation (docs/policies.md): an approval still unanswered shortly before it
expires goes once to a fallback group (the old presentations revoked in the
same commit), whose members then approve it as a quorum; or it expires. At most
one escalation per version, with processes racing, on every store."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from adapters.bootstrap import backend_for, build_ledger
from adapters.housekeeping import housekeeping_pass
from adapters.settings import load_settings
from adapters.store import LedgerStore
from domain.attempt import ExecutionAttempt
from domain.directory import DirectoryKind, actor_record_id
from domain.errors import ApprovalUnavailable, InvalidInput, InvalidPolicySet
from domain.notifications import proposal_notifications
from domain.policy import compile_policies
from domain.proposal import PresentationStatus, Proposal
from domain.services.approval import approve
from domain.services.authorization import AuthorizationFailed
from domain.services.escalation import escalate_if_due
from domain.services.proposals import propose
from domain.services.recheck import recheck
from domain.timeutil import parse_utc
from tests.support.policies import apply, enrol_members, present_to
from tests.support.subscribers import drain
from tests.support.worlds.approval import CAPABILITY, World, base_spec

ON_CALL = f"""
@id("on-call")
@escalate_to("leads")
@escalate_before("10m")
permit (principal, action == Action::"{CAPABILITY}", resource);
"""
TWO_OF_FINANCE = f"""
@id("two-of-finance")
@quorum("2")
@group("finance")
@escalate_to("leads")
@escalate_before("10m")
permit (principal, action == Action::"{CAPABILITY}", resource);
"""


def proposed(world: World, digest: str | None) -> str:
    spec = base_spec(policy_digest=digest) if digest else base_spec()
    return propose(world.ctx, actor_id="alice", spec_data=spec).proposal_id


def into_window(world: World, store: LedgerStore, proposal_id: str) -> None:
    """Move the clock to 5 minutes before the version expires (inside the 10m lead)."""
    proposal = store.get(Proposal, proposal_id)
    assert proposal is not None
    expires = parse_utc(proposal.expiry_of(proposal.current_version))
    world.clock.moment = expires - timedelta(minutes=5)


def test_a_single_approval_escalates_once_and_a_lead_approves_it(
    world: World, store: LedgerStore
) -> None:
    view = apply(world, ON_CALL)
    (lead,) = enrol_members(world, 1, group="leads")
    proposal_id = proposed(world, view.digest)
    own = world.present(proposal_id).token
    assert not escalate_if_due(world.ctx, proposal_id)  # not within the lead time yet
    into_window(world, store, proposal_id)
    assert escalate_if_due(world.ctx, proposal_id)
    assert not escalate_if_due(world.ctx, proposal_id)  # once per version
    stored = store.get(Proposal, proposal_id)
    assert stored is not None
    assert all(
        p["status"] == PresentationStatus.REVOKED.value for p in stored.presentations.values()
    )
    assert stored.versions[1]["escalated"]["group"] == "leads"
    # the requester's token is revoked and the requester is no longer presented to
    with pytest.raises(ApprovalUnavailable):
        approve(world.ctx, token=own, provenance=world.who)
    with pytest.raises(InvalidInput, match="fallback group"):
        world.present(proposal_id)
    # a member of another group cannot approve; a lead can
    world.put(DirectoryKind.ACTOR, actor_record_id("m1"), enabled=True, groups=["sales"])
    with pytest.raises(ApprovalUnavailable):
        approve(world.ctx, token=present_to(world, proposal_id, lead), provenance=lead)
    world.put(DirectoryKind.ACTOR, actor_record_id("m1"), enabled=True, groups=["leads"])
    done = approve(world.ctx, token=present_to(world, proposal_id, lead), provenance=lead)
    assert done.status == "execution_pending" and done.attempt_id
    attempt = store.get(ExecutionAttempt, done.attempt_id)
    assert attempt is not None and attempt.approval is not None
    assert attempt.approval["approvers"] == ["m1"]
    assert (attempt.approval["group"], attempt.approval["required"]) == ("leads", 1)
    recheck(world.ctx, attempt, world.clock.now(), fresh=True)
    stored = store.get(Proposal, proposal_id)
    assert stored is not None
    told = [n.type.value for n in proposal_notifications(stored, world.clock.now())]
    assert told == ["proposal.escalated", "proposal.approved"]
    assert world.executor_calls() == 0


def test_a_quorum_escalates_and_counts_only_fallback_members(
    world: World, store: LedgerStore
) -> None:
    view = apply(world, TWO_OF_FINANCE)
    m1, m2, m3 = enrol_members(world, 3)
    world.put(DirectoryKind.ACTOR, actor_record_id("m2"), enabled=True, groups=["finance", "leads"])
    world.put(DirectoryKind.ACTOR, actor_record_id("m3"), enabled=True, groups=["leads"])
    proposal_id = proposed(world, view.digest)
    assert approve(world.ctx, token=present_to(world, proposal_id, m1), provenance=m1).votes == 1
    waiting = present_to(world, proposal_id, m2)
    into_window(world, store, proposal_id)
    assert escalate_if_due(world.ctx, proposal_id)
    with pytest.raises(ApprovalUnavailable):  # revoked with the escalation
        approve(world.ctx, token=waiting, provenance=m2)
    # m1 voted as finance only: not counted for the leads
    second = approve(world.ctx, token=present_to(world, proposal_id, m2), provenance=m2)
    assert (second.status, second.votes, second.required) == ("vote_recorded", 1, 2)
    done = approve(world.ctx, token=present_to(world, proposal_id, m3), provenance=m3)
    assert done.status == "execution_pending" and done.attempt_id
    attempt = store.get(ExecutionAttempt, done.attempt_id)
    assert attempt is not None and attempt.approval is not None
    assert attempt.approval["approvers"] == ["m2", "m3"]
    assert attempt.approval["group"] == "leads"
    # the worker's recheck counts them in the fallback group too
    recheck(world.ctx, attempt, world.clock.now(), fresh=True)
    world.put(DirectoryKind.ACTOR, actor_record_id("m3"), enabled=True, groups=["finance"])
    with pytest.raises(AuthorizationFailed):
        recheck(world.ctx, attempt, world.clock.now(), fresh=True)


def test_an_unanswered_escalation_expires_with_its_webhook(
    world: World, store: LedgerStore
) -> None:
    view = apply(world, ON_CALL)
    proposal_id = proposed(world, view.digest)
    world.present(proposal_id)
    into_window(world, store, proposal_id)
    assert escalate_if_due(world.ctx, proposal_id)
    world.clock.advance(6 * 60)
    stored = store.get(Proposal, proposal_id)
    assert stored is not None
    told = [n.type.value for n in proposal_notifications(stored, world.clock.now())]
    assert told == ["proposal.escalated", "proposal.expired"]
    assert not escalate_if_due(world.ctx, proposal_id)


def test_without_an_escalation_policy_nothing_escalates(world: World, store: LedgerStore) -> None:
    proposal_id = proposed(world, None)
    world.present(proposal_id)
    into_window(world, store, proposal_id)
    assert not escalate_if_due(world.ctx, proposal_id)


def test_racing_processes_escalate_a_version_exactly_once(
    world: World, store: LedgerStore, request: pytest.FixtureRequest
) -> None:
    view = apply(world, ON_CALL)
    rounds = 2 if request.node.callspec.params["store"] == "dynamodb" else 5
    for _ in range(rounds):
        proposal_id = proposed(world, view.digest)
        world.present(proposal_id)
        into_window(world, store, proposal_id)
        barrier = threading.Barrier(6)

        def race(pid: str, gate: threading.Barrier = barrier) -> bool:
            gate.wait()
            return escalate_if_due(world.ctx, pid)

        with ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(race, [proposal_id] * 6))
        assert answers.count(True) == 1, answers
        kinds = [e.topic.rsplit(".", 1)[-1] for e in store.read_stream(proposal_id)]
        assert kinds.count("Escalated") == 1, kinds


def test_the_housekeeping_pass_escalates_what_is_due(world: World, store: LedgerStore) -> None:
    if store.recorder.__class__.__name__.lower().startswith("dynamodb"):
        pytest.skip("the emulator's streams are covered by the race test")
    ledger = build_ledger(
        load_settings(store="memory", env="test"),
        backend=backend_for(store.recorder),
        clock=world.clock,
    )
    view = apply(world, ON_CALL)
    proposal_id = proposed(world, view.digest)
    world.present(proposal_id)
    drain(ledger)
    assert housekeeping_pass(ledger).escalated == 0
    into_window(world, store, proposal_id)
    assert housekeeping_pass(ledger).escalated == 1
    drain(ledger)  # the watch row leaves the list
    assert housekeeping_pass(ledger).escalated == 0


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ('@escalate_to("leads")', "go together"),
        ('@escalate_before("10m")', "go together"),
        ('@escalate_to("leads") @escalate_before("ten")', "lead time"),
        ('@escalate_to("leads") @escalate_before("25h")', "at most 24h"),
        ('@escalate_to("") @escalate_before("10m")', "group name"),
        ('@auto_approve @escalate_to("leads") @escalate_before("10m")', "exclude"),
    ],
)
def test_malformed_escalations_are_refused(annotations: str, message: str) -> None:
    with pytest.raises(InvalidPolicySet, match=message):
        compile_policies(f'@id("p") {annotations} permit (principal, action, resource);')


def test_an_escalation_on_a_forbid_is_refused() -> None:
    text = (
        '@id("p") @escalate_to("leads") @escalate_before("1h") '
        "forbid (principal, action, resource);"
    )
    with pytest.raises(InvalidPolicySet, match="permit policies only"):
        compile_policies(text)
    (info,) = compile_policies(text.replace("forbid", "permit")).policies
    assert info.as_dict()["escalation"] == {
        "group": "leads",
        "lead_seconds": 3600,
        "policy_id": "p",
    }


TWO_OF_FINANCE_NO_ESCALATION = f"""
@id("two-of-finance")
@quorum("2")
@group("finance")
permit (principal, action == Action::"{CAPABILITY}", resource);
"""


@pytest.mark.parametrize(
    "changed_to",
    [TWO_OF_FINANCE_NO_ESCALATION, TWO_OF_FINANCE.replace('"leads"', '"ops"')],
    ids=["escalation-dropped", "escalation-renamed"],
)
def test_a_policy_change_after_the_escalation_leaves_the_fallback_group_deciding(
    world: World, store: LedgerStore, changed_to: str
) -> None:
    """The claim counts the leads through the version's recorded escalation; the
    worker's recheck must count them there too, not in the group the policy set
    names by then, and still refuse a lead removed from the group since."""
    view = apply(world, TWO_OF_FINANCE)
    _, m2, m3 = enrol_members(world, 3, group="leads")
    proposal_id = proposed(world, view.digest)
    into_window(world, store, proposal_id)
    assert escalate_if_due(world.ctx, proposal_id)
    first = approve(world.ctx, token=present_to(world, proposal_id, m2), provenance=m2)
    assert (first.status, first.votes) == ("vote_recorded", 1)
    apply(world, changed_to)  # between the votes: the policy set no longer names the leads
    done = approve(world.ctx, token=present_to(world, proposal_id, m3), provenance=m3)
    assert done.status == "execution_pending" and done.attempt_id
    attempt = store.get(ExecutionAttempt, done.attempt_id)
    assert attempt is not None and attempt.approval is not None
    assert (attempt.approval["group"], attempt.approval["escalated"]) == ("leads", True)
    for fresh in (True, False):
        recheck(world.ctx, attempt, world.clock.now(), fresh=fresh)
    world.put(DirectoryKind.ACTOR, actor_record_id("m3"), enabled=True, groups=["finance"])
    for fresh in (True, False):
        with pytest.raises(AuthorizationFailed, match="voter_not_member"):
            recheck(world.ctx, attempt, world.clock.now(), fresh=fresh)


def test_a_quorum_that_never_escalated_records_no_escalation(
    world: World, store: LedgerStore
) -> None:
    view = apply(world, TWO_OF_FINANCE)
    m1, m2 = enrol_members(world, 2)
    proposal_id = proposed(world, view.digest)
    approve(world.ctx, token=present_to(world, proposal_id, m1), provenance=m1)
    done = approve(world.ctx, token=present_to(world, proposal_id, m2), provenance=m2)
    attempt = store.get(ExecutionAttempt, done.attempt_id or "")
    assert attempt is not None and attempt.approval is not None
    assert "escalated" not in attempt.approval
    recheck(world.ctx, attempt, world.clock.now(), fresh=True)
