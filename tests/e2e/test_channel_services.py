"""A channel service (a channel token registered for one channel, without
per-conversation claims) asserts an approval's or a decline's provenance in
the request, only for bindings on its own channel; the decision records it.
The per-conversation channel token keeps working as before."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import Any

import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger, build_ledger
from adapters.settings import Settings, load_settings
from api.embedded import EmbeddedLedger, Principal, Role
from api.http.app import create_app
from domain.errors import ApprovalUnavailable
from domain.services.approval import Provenance
from tests.support.clocks import FixedClock
from tests.support.http_helpers import (
    API,
    DIRECTORY,
    FIXED_NOW,
    PROVENANCE,
    Headers,
    assert_error,
    propose_and_present,
)

pytestmark = pytest.mark.usefixtures("directory")

ASSERTED = asdict(PROVENANCE)  # the directory puts its bindings on channel "slack"


def claimed_events(ledger: Ledger, token: str, kind: str = "Claimed") -> list[dict[str, Any]]:
    from domain.services.proposals import token_hash, token_lookup_key

    found = ledger.store.get_lookup(token_lookup_key(token_hash(token)))
    assert found is not None
    events, _ = ledger.store.audit_events(found["proposal_id"])
    return [e.data() for e in events if type(e).__qualname__.endswith(kind)]


@pytest.fixture
def slack_service(bearer: Callable[..., Headers]) -> Headers:
    return bearer("channel", subject="slack-app", provenance=None, channel="slack")


def test_a_channel_service_approves_for_a_binding_of_its_channel(
    client: TestClient,
    bearer: Callable[..., Headers],
    slack_service: Headers,
    ledger: Ledger,
) -> None:
    token = propose_and_present(client, bearer)
    body = {"token": token, "provenance": ASSERTED}
    first = client.post(f"{API}/approvals", headers=slack_service, json=body)
    assert first.status_code == 202, first.text
    again = client.post(f"{API}/approvals", headers=slack_service, json=body)
    assert again.json() == first.json()  # a repeat converges on the one attempt
    (claimed,) = claimed_events(ledger, token)
    assert claimed["asserted_by"] == "slack-app"


def test_a_channel_service_asserting_another_channels_binding_is_refused_uniformly(
    client: TestClient,
    bearer: Callable[..., Headers],
    ledger: Ledger,
) -> None:
    token = propose_and_present(client, bearer)
    telegram = bearer("channel", subject="telegram-bot", provenance=None, channel="telegram")
    body = {"token": token, "provenance": ASSERTED}
    refused = client.post(f"{API}/approvals", headers=telegram, json=body)
    unknown = client.post(
        f"{API}/approvals", headers=telegram, json={"token": "x" * 43, "provenance": ASSERTED}
    )
    assert_error(refused, 404, "approval_unavailable")
    assert refused.json() == unknown.json()  # nothing tells the two apart
    assert_error(
        client.post(f"{API}/declines", headers=telegram, json=body), 404, "approval_unavailable"
    )
    assert claimed_events(ledger, token) == [] and claimed_events(ledger, token, "Declined") == []
    # The slack service can still approve it: nothing was consumed.
    slack = bearer("channel", subject="slack-app", provenance=None, channel="slack")
    assert client.post(f"{API}/approvals", headers=slack, json=body).status_code == 202


def test_a_binding_moved_to_another_channel_is_refused_even_to_a_stored_attempt(
    client: TestClient,
    bearer: Callable[..., Headers],
    slack_service: Headers,
    admin: Headers,
) -> None:
    token = propose_and_present(client, bearer)
    body = {"token": token, "provenance": ASSERTED}
    assert client.post(f"{API}/approvals", headers=slack_service, json=body).status_code == 202
    moved = {"conversation_key": PROVENANCE.conversation_key, "channel": "teams", "active": True}
    put = client.put(
        f"{DIRECTORY}/channel-bindings/{PROVENANCE.channel_binding_id}", json=moved, headers=admin
    )
    assert put.status_code == 200, put.text
    assert_error(
        client.post(f"{API}/approvals", headers=slack_service, json=body),
        404,
        "approval_unavailable",
    )


def test_a_channel_service_declines_for_its_channel_and_the_decline_records_it(
    client: TestClient, bearer: Callable[..., Headers], slack_service: Headers, ledger: Ledger
) -> None:
    token = propose_and_present(client, bearer)
    answer = client.post(
        f"{API}/declines", headers=slack_service, json={"token": token, "provenance": ASSERTED}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "declined"
    (declined,) = claimed_events(ledger, token, "Declined")
    assert declined["asserted_by"] == "slack-app"


def test_a_provenance_that_is_not_the_presentations_is_refused_uniformly(
    client: TestClient, bearer: Callable[..., Headers], slack_service: Headers
) -> None:
    token = propose_and_present(client, bearer)
    other = {**ASSERTED, "conversation_key": "C-other"}
    assert_error(
        client.post(
            f"{API}/approvals", headers=slack_service, json={"token": token, "provenance": other}
        ),
        404,
        "approval_unavailable",
    )


def test_a_channel_service_must_assert_the_provenance(
    client: TestClient, bearer: Callable[..., Headers], slack_service: Headers
) -> None:
    token = propose_and_present(client, bearer)
    missing = client.post(f"{API}/approvals", headers=slack_service, json={"token": token})
    assert_error(missing, 422, "invalid_input")
    assert "provenance" in missing.json()["detail"]


def test_the_per_conversation_token_keeps_working_and_asserts_nothing_else(
    client: TestClient, bearer: Callable[..., Headers], ledger: Ledger
) -> None:
    token = propose_and_present(client, bearer)
    per_conversation = bearer("channel", subject="chat-backend")
    other = {**ASSERTED, "actor_id": "bob"}
    mixed = client.post(
        f"{API}/approvals", headers=per_conversation, json={"token": token, "provenance": other}
    )
    assert_error(mixed, 422, "invalid_input")
    ok = client.post(f"{API}/approvals", headers=per_conversation, json={"token": token})
    assert ok.status_code == 202, ok.text
    (claimed,) = claimed_events(ledger, token)
    assert claimed["asserted_by"] is None


def test_other_roles_cannot_assert_a_provenance(
    client: TestClient, bearer: Callable[..., Headers]
) -> None:
    token = propose_and_present(client, bearer)
    for role in ("proposer", "admin", "actor"):
        answer = client.post(
            f"{API}/approvals",
            headers=bearer(role, subject="someone"),
            json={"token": token, "provenance": ASSERTED},
        )
        assert_error(answer, 403, "forbidden")


@pytest.fixture
def registered_settings() -> Settings:
    return load_settings(store="memory", env="test", auth_channel_services="slack-app=slack")


@pytest.fixture
def registered(registered_settings: Settings) -> Iterator[tuple[TestClient, Ledger]]:
    ledger = build_ledger(registered_settings, clock=FixedClock(FIXED_NOW))
    with TestClient(create_app(registered_settings, ledger=ledger)) as test_client:
        yield test_client, ledger
    ledger.close()


def test_a_service_registered_by_subject_needs_no_channel_claim(
    registered: tuple[TestClient, Ledger], registered_settings: Settings
) -> None:
    import jwt

    from api.http.auth import mint_token
    from tests.support.http_helpers import directory_puts

    client, _ = registered

    def bearer(role: str, subject: str = "tester", **kwargs: Any) -> Headers:
        minted = mint_token(registered_settings, subject=subject, role=role, **kwargs)
        return {"Authorization": f"Bearer {minted}"}

    for path, put_body in directory_puts():
        assert client.put(DIRECTORY + path, json=put_body, headers=bearer("admin")).is_success
    token = propose_and_present(client, bearer)
    service = bearer("channel", subject="slack-app", provenance=None)  # only sub and role
    claims = jwt.decode(service["Authorization"][7:], options={"verify_signature": False})
    assert set(claims) == {"sub", "role", "iat", "exp"}
    answer = client.post(
        f"{API}/approvals", headers=service, json={"token": token, "provenance": ASSERTED}
    )
    assert answer.status_code == 202, answer.text
    # A token claiming another channel than its registration is refused outright.
    secret = registered_settings.auth_hs256_secret.get_secret_value()
    liar = jwt.encode({**claims, "channel": "telegram"}, secret, algorithm="HS256")
    answer = client.get(f"{API}/proposals", headers={"Authorization": f"Bearer {liar}"})
    assert_error(answer, 401, "unauthenticated")


def test_the_in_process_api_acts_as_a_channel_service(
    client: TestClient, bearer: Callable[..., Headers], ledger: Ledger
) -> None:
    embedded = EmbeddedLedger(ledger, start=False)
    telegram = embedded.acting_as(Principal("telegram-bot", Role.CHANNEL, channel="telegram"))
    slack = embedded.acting_as(Principal("slack-app", Role.CHANNEL, channel="slack"))
    token = propose_and_present(client, bearer)
    with pytest.raises(ApprovalUnavailable):
        telegram.approve(token, provenance=PROVENANCE)
    approved = slack.approve(token, provenance=PROVENANCE)
    assert approved.status == "execution_pending"
    token_2 = propose_and_present(client, bearer)
    assert slack.decline(token_2, provenance=Provenance(**ASSERTED)).status == "declined"


def test_a_channel_service_reads_no_proposal_or_attempt(
    client: TestClient, bearer: Callable[..., Headers], slack_service: Headers
) -> None:
    token = propose_and_present(client, bearer)
    approved = client.post(
        f"{API}/approvals", headers=slack_service, json={"token": token, "provenance": ASSERTED}
    )
    attempt = approved.json()["attempt_id"]
    assert_error(
        client.get(f"{API}/execution-attempts/{attempt}", headers=slack_service),
        404,
        "not_found",
    )
    propose_and_present(client, bearer)  # one more waits in alice's inbox
    query = {"actor_id": "alice", "status": "presented"}
    own = client.get(f"{API}/proposals", params=query, headers=bearer("channel"))
    assert len(own.json()["items"]) == 1
    inbox = client.get(f"{API}/proposals", params=query, headers=slack_service)
    assert inbox.status_code == 200 and inbox.json()["items"] == [], inbox.text
