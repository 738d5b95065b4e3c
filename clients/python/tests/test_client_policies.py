"""The client's policy and standing-grant calls against a real `ledger serve`, on
SQLite and on the emulator: apply a Cedar set, a proposal it approves by itself,
one it forbids (its own error class), a standing grant used, listed and revoked."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from ledger_servers import DIGESTS, FAKE, Actor, LedgerServer, spec_args

from ledger_client import Client
from ledger_client.errors import (
    InvalidInput,
    InvalidPolicySet,
    PolicyDenied,
    PolicyDigestMismatch,
    StalePolicySet,
)

POLICIES = """
@id("client-small")
@auto_approve
permit (principal == Actor::"{actor}", action, resource)
when {{ context.content has minutes && context.content.minutes <= 30 }};

@id("client-no-deletions")
forbid (principal == Actor::"{actor}", action, resource)
when {{ context.effect == "delete" }};
"""


def test_policies_and_standing_grants_through_the_client(
    ledger_server: LedgerServer, actor: Actor
) -> None:
    who = actor.provenance.actor_id
    with (
        Client(ledger_server.url, token=ledger_server.token("admin")) as admin,
        Client(ledger_server.url, token=ledger_server.token("proposer")) as assistant,
    ):
        before = admin.policies()
        with pytest.raises(InvalidPolicySet) as bad:
            admin.apply_policies("permit (principal, action, resource);")  # no @id
        assert isinstance(bad.value, InvalidInput) and bad.value.status == 422
        with pytest.raises(StalePolicySet):
            admin.apply_policies(POLICIES.format(actor=who), expected_version=before.version + 9)
        applied = admin.apply_policies(POLICIES.format(actor=who), expected_version=before.version)
        try:
            assert applied.version == before.version + 1 and applied.changed
            assert [(p.id, p.effect, p.auto_approve) for p in applied.policies] == [
                ("client-small", "permit", True),
                ("client-no-deletions", "forbid", False),
            ]
            seen = assistant.policies()  # a proposer reads the digest, not the text
            assert seen.digest == applied.digest and seen.text is None
            digests = dataclasses.replace(DIGESTS, policy_digest=str(seen.digest))

            def spec(effect: str, minutes: int) -> object:
                content = {"title": "Water the plants", "minutes": minutes}
                args = spec_args(effect=effect, content=content, digests=digests)
                return assistant.build_spec(FAKE, **args)

            with pytest.raises(PolicyDigestMismatch):
                assistant.propose(who, assistant.build_spec(FAKE, **spec_args()))
            small = assistant.propose(who, spec("create", 10))  # type: ignore[arg-type]
            assert small.status == "claimed" and small.attempt_id
            assert small.approval is not None and small.approval.kind == "policy"
            assert small.approval.policy_id == "client-small"
            done = admin.wait(small.attempt_id, timeout=30)
            assert done.status == "succeeded" and done.approval is not None
            assert done.approval.kind == "policy"
            with pytest.raises(PolicyDenied) as denied:
                assistant.propose(who, spec("delete", 1))  # type: ignore[arg-type]
            assert denied.value.status == 403 and "client-no-deletions" in str(denied.value)

            made = admin.grant(
                who,
                capability=FAKE,
                max_uses=1,
                expires_at=datetime.now(UTC) + timedelta(days=1),
                conditions=[{"field": "minutes", "op": "lte", "value": 120}],
            )
            assert (made.state, made.uses, made.max_uses) == ("active", 0, 1)
            granted = assistant.propose(who, spec("create", 60))  # type: ignore[arg-type]
            assert granted.approval is not None and granted.approval.kind == "grant"
            assert (granted.approval.grant_id, granted.approval.use) == (made.grant_id, 1)
            waits = assistant.propose(who, spec("create", 60))  # type: ignore[arg-type]
            assert waits.status == "presented" and waits.approval is None
            (listed,) = admin.standing_grants(who).items
            assert (listed.grant_id, listed.state, listed.uses) == (made.grant_id, "spent", 1)
            revoked = admin.revoke_grant(made.grant_id)
            assert revoked.revoked and revoked.state == "revoked"
            assert admin.revoke_grant(made.grant_id).revoked_at == revoked.revoked_at
            assert admin.standing_grant(made.grant_id).state == "revoked"
        finally:
            admin.apply_policies("")  # the server is shared: leave no policy behind
