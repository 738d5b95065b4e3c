"""Each refusal a real `ledger serve` answers raises the client's class for its code,
with the status and the server's detail (SQLite and the emulator)."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable
from typing import Any

import pytest
from ledger_servers import FAKE, Actor, LedgerServer, spec_args

from ledger_client import Client
from ledger_client import _core as core
from ledger_client import answers as a
from ledger_client import errors as e
from ledger_client.requests import ProposalSpec
from ledger_client.spec import sha256_digest

Trigger = Callable[[LedgerServer, Actor], Any]


def proposer(server: LedgerServer) -> Client:
    return Client(server.url, token=server.token("proposer"))


def a_spec(c: Client, capability: str = FAKE, **changes: Any) -> ProposalSpec:
    return dataclasses.replace(c.build_spec(capability, **spec_args()), **changes)


def proposed(server: LedgerServer, actor: Actor, **changes: Any) -> tuple[Client, a.ProposalOut]:
    c = proposer(server)
    return c, c.propose(actor.provenance.actor_id, a_spec(c, **changes))


def approved(server: LedgerServer, actor: Actor, **changes: Any) -> a.ApprovalOut:
    c, proposal = proposed(server, actor, **changes)
    token = c.present(proposal, **actor.binding).token
    with Client(server.url, token=actor.channel_token) as channel:
        return channel.approve(token)


def reused_key(server: LedgerServer, actor: Actor) -> None:
    c = proposer(server)
    key = secrets.token_urlsafe(32)
    c.propose(actor.provenance.actor_id, a_spec(c), idempotency_key=key)
    c.propose(actor.provenance.actor_id, a_spec(c, destination="notes"), idempotency_key=key)


def revised_after_claim(server: LedgerServer, actor: Actor) -> None:
    c = proposer(server)
    approval = approved(server, actor)
    lineage = Client(server.url, token=server.token("admin")).attempt(approval).proposal_id
    c.propose(actor.provenance.actor_id, a_spec(c), lineage_id=lineage)


def stale_version(server: LedgerServer, actor: Actor) -> None:
    c, proposal = proposed(server, actor)
    c.propose(
        actor.provenance.actor_id, a_spec(c), lineage_id=proposal.proposal_id, expected_version=7
    )


UNKNOWN = {"capability": "fake.operator_only", "content": {"simulate": "timeout_after_effect"}}
"""An operator-only build whose answer is lost: ``outcome_unknown`` at once."""


def resolve(server: LedgerServer, actor: Actor, revision_offset: int, **changes: Any) -> None:
    with Client(server.url, token=server.token("admin")) as admin:
        settled = admin.wait(approved(server, actor, **changes), timeout=30)
        admin.resolve(
            settled.attempt_id,
            expected_revision=settled.revision + revision_offset,
            resolution="no_effect",
            reason="checked with the provider",
        )


def reconcile_without_reconciler(server: LedgerServer, actor: Actor) -> None:
    with Client(server.url, token=server.token("admin")) as admin:
        unknown = admin.wait(approved(server, actor, **UNKNOWN), timeout=30)
        assert unknown.status == "outcome_unknown"
        admin.reconcile(unknown.attempt_id, expected_revision=unknown.revision)


def too_many_presentations(server: LedgerServer, actor: Actor) -> None:
    c, proposal = proposed(server, actor)
    for _ in range(21):
        c.present(proposal, **actor.binding)


def too_large(server: LedgerServer, actor: Actor) -> None:
    c = proposer(server)
    c.propose(actor.provenance.actor_id, a_spec(c, content={"text": "x" * 2_000_000}))


def wrong_method(server: LedgerServer, actor: Actor) -> None:
    proposer(server).call(core.Call("DELETE", "/executors", a.ExecutorListOut))


CASES: dict[type[e.LedgerClientError], tuple[int, Trigger]] = {
    e.Unauthenticated: (401, lambda s, _: Client(s.url, token="not-a-jwt").executors()),
    e.Forbidden: (403, lambda s, _: Client(s.url, token=s.token("actor")).executors()),
    e.NotFound: (404, lambda s, _: proposer(s).get_proposal("prop_" + "0" * 32)),
    e.ApprovalUnavailable: (404, lambda s, x: Client(s.url, token=x.channel_token).approve("no")),
    e.InvalidInput: (
        422,
        lambda s, x: proposer(s).present(proposed(s, x)[1], ttl_seconds=5, **x.binding),
    ),
    e.InvalidSpec: (
        422,
        lambda s, _: proposer(s).propose(
            "alice", a_spec(proposer(s), expires_at="2020-01-01T00:00:00Z")
        ),
    ),
    e.UnknownPermission: (
        422,
        lambda s, _: proposer(s).propose("alice", a_spec(proposer(s), permission="gold.mint")),
    ),
    e.ExecutorBuildUnavailable: (
        422,
        lambda s, _: proposer(s).propose(
            "alice", a_spec(proposer(s), executor_build=sha256_digest("gone"))
        ),
    ),
    e.IdempotencyKeyRefused: (422, reused_key),
    e.StaleVersion: (409, stale_version),
    e.ProposalClaimed: (409, revised_after_claim),
    e.StaleRevision: (409, lambda s, x: resolve(s, x, revision_offset=5, **UNKNOWN)),
    e.ReconcilerUnavailable: (409, reconcile_without_reconciler),
    e.NotOutcomeUnknown: (409, lambda s, x: resolve(s, x, revision_offset=0)),
    e.TooManyPresentations: (409, too_many_presentations),
    e.PayloadTooLarge: (413, too_large),
    e.MethodNotAllowed: (405, wrong_method),
}


@pytest.mark.parametrize("error", list(CASES), ids=lambda cls: cls.code)
def test_each_refusal_raises_the_class_of_its_code(
    ledger_server: LedgerServer, actor: Actor, error: type[e.LedgerClientError]
) -> None:
    status, trigger = CASES[error]
    with pytest.raises(e.LedgerClientError) as raised:
        trigger(ledger_server, actor)
    assert type(raised.value) is error, repr(raised.value)
    assert raised.value.status == status and raised.value.code == error.code
    assert raised.value.detail and "Traceback" not in raised.value.detail
