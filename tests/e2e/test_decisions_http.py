"""Decline, cancel, the proposal view, the inbox and expiry as a fact, over HTTP."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger, build_ledger
from adapters.settings import Settings
from adapters.system import ManualClock
from api.http.app import create_app
from tests.support.http_helpers import (
    API,
    FIXED_NOW,
    PROVENANCE,
    Headers,
    assert_error,
    propose_and_present,
    spec,
)

pytestmark = pytest.mark.usefixtures("directory")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(FIXED_NOW)


@pytest.fixture
def ledger(settings: Settings, clock: ManualClock) -> Iterator[Ledger]:
    wired = build_ledger(settings, clock=clock)
    yield wired
    wired.close()


@pytest.fixture
def client(settings: Settings, ledger: Ledger) -> Iterator[TestClient]:
    with TestClient(create_app(settings, ledger=ledger)) as test_client:
        yield test_client


@pytest.fixture
def channel(bearer: Callable[..., Headers]) -> Headers:
    return bearer("channel", subject="chat-backend")


@pytest.fixture
def proposer(bearer: Callable[..., Headers]) -> Headers:
    return bearer("proposer", subject="assistant-backend")


def proposal_of(ledger: Ledger, token: str) -> str:
    from domain.services.proposals import token_hash, token_lookup_key

    found = ledger.store.get_lookup(token_lookup_key(token_hash(token)))
    assert found is not None
    return found["proposal_id"]


def topics(ledger: Ledger, stream_id: str) -> list[str]:
    return [e.topic.rsplit(".", 1)[-1] for e in ledger.store.read_stream(stream_id)]


def inbox(
    client: TestClient, headers: Headers, status: str = "presented", **params: Any
) -> list[dict[str, Any]]:
    answer = client.get(
        f"{API}/proposals",
        headers=headers,
        params={"actor_id": PROVENANCE.actor_id, "status": status, **params},
    )
    assert answer.status_code == 200, answer.text
    items: list[dict[str, Any]] = answer.json()["items"]
    return items


def test_a_decline_consumes_the_control_and_no_approval_can_follow(
    client: TestClient,
    ledger: Ledger,
    bearer: Callable[..., Headers],
    channel: Headers,
) -> None:
    token = propose_and_present(client, bearer)
    proposal_id = proposal_of(ledger, token)
    assert [i["proposal_id"] for i in inbox(client, channel)] == [proposal_id]

    declined = client.post(f"{API}/declines", json={"token": token}, headers=channel)
    assert declined.status_code == 200, declined.text
    assert declined.json() == {
        "proposal_id": proposal_id,
        "version": 1,
        "status": "declined",
        "attempt_id": None,
    }
    assert_error(
        client.post(f"{API}/approvals", json={"token": token}, headers=channel),
        404,
        "approval_unavailable",
    )
    again = client.post(f"{API}/declines", json={"token": token}, headers=channel)
    assert again.json() == declined.json()
    assert topics(ledger, proposal_id).count("Declined") == 1

    view = client.get(f"{API}/proposals/{proposal_id}", headers=channel).json()
    assert view["status"] == "declined"
    assert [p["status"] for p in view["presentations"]] == ["consumed"]
    assert inbox(client, channel) == []
    assert [i["proposal_id"] for i in inbox(client, channel, "declined")] == [proposal_id]


def test_a_decline_after_the_approval_gets_the_stored_claim(
    client: TestClient,
    ledger: Ledger,
    bearer: Callable[..., Headers],
    channel: Headers,
) -> None:
    token = propose_and_present(client, bearer)
    approved = client.post(f"{API}/approvals", json={"token": token}, headers=channel)
    assert approved.status_code == 202
    # the approval route refreshes the inbox itself (no projector runs here)
    assert inbox(client, channel) == []
    claimed = inbox(client, channel, "claimed")
    assert [i["attempt_id"] for i in claimed] == [approved.json()["attempt_id"]]
    declined = client.post(f"{API}/declines", json={"token": token}, headers=channel)
    assert declined.status_code == 200
    assert declined.json()["status"] == "claimed"
    assert declined.json()["attempt_id"] == approved.json()["attempt_id"]
    assert "Declined" not in topics(ledger, proposal_of(ledger, token))


def test_decline_failures_are_the_uniform_approval_404(
    client: TestClient,
    bearer: Callable[..., Headers],
    channel: Headers,
) -> None:
    token = propose_and_present(client, bearer)
    unknown = client.post(f"{API}/approvals", json={"token": "x" * 43}, headers=channel)
    from tests.support.worlds.http_api import STRANGER

    stranger = bearer("channel", subject="chat-backend", provenance=STRANGER)
    for answer in (
        client.post(f"{API}/declines", json={"token": "x" * 43}, headers=channel),
        client.post(f"{API}/declines", json={"token": token}, headers=stranger),
    ):
        assert answer.status_code == 404
        assert answer.content == unknown.content


def test_cancel_revokes_every_control_once_and_a_claimed_version_keeps_its_truth(
    client: TestClient,
    ledger: Ledger,
    bearer: Callable[..., Headers],
    channel: Headers,
    proposer: Headers,
) -> None:
    token = propose_and_present(client, bearer)
    proposal_id = proposal_of(ledger, token)
    canceled = client.post(
        f"{API}/proposals/{proposal_id}/cancel", json={"version": 1}, headers=proposer
    )
    assert canceled.status_code == 200, canceled.text
    assert canceled.json()["status"] == "canceled"
    assert [p["status"] for p in canceled.json()["presentations"]] == ["revoked"]
    assert_error(
        client.post(f"{API}/approvals", json={"token": token}, headers=channel),
        404,
        "approval_unavailable",
    )
    again = client.post(
        f"{API}/proposals/{proposal_id}/cancel", json={"version": 1}, headers=proposer
    )
    assert again.json() == canceled.json()
    assert topics(ledger, proposal_id).count("Canceled") == 1
    assert inbox(client, channel) == []

    claimed_token = propose_and_present(client, bearer)
    claimed_id = proposal_of(ledger, claimed_token)
    assert (
        client.post(f"{API}/approvals", json={"token": claimed_token}, headers=channel).status_code
        == 202
    )
    late = client.post(
        f"{API}/proposals/{claimed_id}/cancel", json={"version": 1}, headers=proposer
    )
    assert late.status_code == 200
    assert late.json()["status"] == "claimed"
    assert late.json()["versions"][0]["attempt_id"]
    assert "Canceled" not in topics(ledger, claimed_id)
    assert_error(
        client.post(f"{API}/proposals/{claimed_id}/cancel", json={"version": 9}, headers=proposer),
        404,
        "not_found",
    )


def test_expiry_is_derived_from_the_clock_in_the_view_and_the_inbox(
    client: TestClient,
    ledger: Ledger,
    clock: ManualClock,
    proposer: Headers,
    channel: Headers,
) -> None:
    created = client.post(
        f"{API}/proposals", headers=proposer, json={"actor_id": PROVENANCE.actor_id, "spec": spec()}
    ).json()
    proposal_id = created["proposal_id"]
    shown = client.post(
        f"{API}/proposals/{proposal_id}/presentations",
        headers=proposer,
        json={
            "version": 1,
            "identity_binding_id": PROVENANCE.identity_binding_id,
            "channel_binding_id": PROVENANCE.channel_binding_id,
            "conversation_key": PROVENANCE.conversation_key,
            "ttl_seconds": 60,
        },
    )
    assert shown.status_code == 201
    assert [i["status"] for i in inbox(client, channel)] == ["presented"]
    clock.advance(59)
    assert (
        client.get(f"{API}/proposals/{proposal_id}", headers=channel).json()["status"]
        == "presented"
    )
    clock.advance(1)
    view = client.get(f"{API}/proposals/{proposal_id}", headers=channel).json()
    assert view["status"] == "expired"
    assert view["presentations"][0]["status"] == "expired"
    assert inbox(client, channel) == []
    expired = inbox(client, channel, "expired")
    assert [(i["proposal_id"], i["status"]) for i in expired] == [(proposal_id, "expired")]
    assert expired[0]["presentation_ids"] == []
    again = client.post(
        f"{API}/proposals/{proposal_id}/presentations",
        headers=proposer,
        json={
            "version": 1,
            "identity_binding_id": PROVENANCE.identity_binding_id,
            "channel_binding_id": PROVENANCE.channel_binding_id,
            "conversation_key": PROVENANCE.conversation_key,
        },
    )
    assert_error(again, 409, "illegal_transition")
    # only time moved: nothing was written
    assert topics(ledger, proposal_id) == ["Proposed", "Presented"]


def test_a_spec_expiry_expires_a_proposal_without_presentations(
    client: TestClient,
    clock: ManualClock,
    proposer: Headers,
    channel: Headers,
) -> None:
    soon = "2026-03-01T12:10:00Z"  # ten minutes after FIXED_NOW
    created = client.post(
        f"{API}/proposals",
        headers=proposer,
        json={"actor_id": PROVENANCE.actor_id, "spec": spec(expires_at=soon)},
    ).json()
    clock.advance(600)
    view = client.get(f"{API}/proposals/{created['proposal_id']}", headers=proposer).json()
    assert view["status"] == "expired"
    assert view["versions"][0]["expires_at"] == soon


def test_the_inbox_pages_with_an_opaque_cursor_soonest_expiry_first(
    client: TestClient,
    bearer: Callable[..., Headers],
    channel: Headers,
    admin: Headers,
) -> None:
    for _ in range(5):
        propose_and_present(client, bearer)
    seen: list[str] = []
    cursor: str | None = None
    while True:
        params = {"actor_id": PROVENANCE.actor_id, "limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = client.get(f"{API}/proposals", headers=admin, params=params).json()
        seen += [i["proposal_id"] for i in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert len(seen) == len(set(seen)) == 5
    assert_error(
        client.get(f"{API}/proposals", headers=admin, params={"actor_id": "alice", "cursor": "!!"}),
        422,
        "invalid_input",
    )


def test_the_proposal_view_never_shows_a_token_or_content(
    client: TestClient,
    ledger: Ledger,
    bearer: Callable[..., Headers],
    proposer: Headers,
) -> None:
    canary = "CANARY-content-7f3a"
    token = propose_and_present(client, bearer, content={"title": canary})
    body = client.get(f"{API}/proposals/{proposal_of(ledger, token)}", headers=proposer).text
    assert token not in body and canary not in body
    from domain.services.proposals import token_hash

    assert token_hash(token) not in body
