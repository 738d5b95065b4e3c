"""``proposal.approved``: one signed delivery per claimed proposal version, whose
body says who or what approved it (a person, a policy, a standing grant), on
memory, SQLite and DynamoDB."""

from __future__ import annotations

import pytest

from adapters.store import LedgerStore
from domain.notifications import NotificationType, notification_id
from domain.services import grants
from domain.services.approval import approve
from domain.services.proposals import propose
from tests.support.policies import apply, grant_bounds
from tests.support.subscribers import drain
from tests.support.webhook_receiver import Receiver
from tests.support.webhooks import subscription, webhook_ledger
from tests.support.worlds.approval import base_spec
from tests.support.worlds.execution import ExecutionWorld


def test_each_approval_is_told_once_with_who_or_what_approved(
    store: LedgerStore,
    pworld: ExecutionWorld,
    request: pytest.FixtureRequest,
    receiver: Receiver,
) -> None:
    approved = frozenset({NotificationType.PROPOSAL_APPROVED})
    ledger = webhook_ledger(
        store, pworld, request, [subscription(receiver.url, "approved", events=approved)]
    )
    by_person = pworld.propose()
    approve(pworld.ctx, token=pworld.present(by_person).token, provenance=pworld.who)
    digest = apply(pworld).digest
    by_policy = propose(
        pworld.ctx,
        actor_id="alice",
        spec_data=base_spec(policy_digest=digest, content={"minutes": 5}),
    ).proposal_id
    grant_id = grants.grant(
        pworld.ctx,
        actor_id="alice",
        bounds=grant_bounds(pworld, max_uses=1),
        grantor=grants.Grantor("admin", "ops"),
    )["grant_id"]
    by_grant = propose(
        pworld.ctx, actor_id="alice", spec_data=base_spec(policy_digest=digest)
    ).proposal_id
    pworld.propose(policy_digest=digest, content={"minutes": 90})  # grant spent: presented
    drain(ledger)
    drain(ledger)
    while ledger.make_deliverer(random=lambda: 0.5).run_once():
        pass

    kind = NotificationType.PROPOSAL_APPROVED
    expected = {notification_id(kind, p, 1): 1 for p in (by_person, by_policy, by_grant)}
    assert receiver.acknowledged() == expected
    approvals = {body["proposal_id"]: body["versions"][0]["approval"] for body in receiver.bodies()}
    assert all(body["type"] == kind.value for body in receiver.bodies())
    assert (approvals[by_person]["kind"], approvals[by_person]["approvers"]) == ("human", ["alice"])
    assert approvals[by_policy]["kind"] == "policy"
    assert approvals[by_policy]["policy_id"] == "small-tasks"
    assert approvals[by_grant]["kind"] == "grant"
    assert approvals[by_grant]["grant_id"] == grant_id
