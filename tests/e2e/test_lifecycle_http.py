"""Propose -> present -> approve -> execute -> status / reconcile / resolve over HTTP."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger
from adapters.executors.fake import fake_build_digest
from domain.services.approval import Provenance
from tests.support.http_helpers import (
    API,
    DIRECTORY,
    PROVENANCE,
    Headers,
    assert_error,
    propose_and_present,
    run_worker,
    spec,
)


@pytest.mark.usefixtures("directory")
def test_one_proposal_goes_all_the_way_to_succeeded(
    client: TestClient, bearer: Callable[..., Headers], ledger: Ledger
) -> None:
    token = propose_and_present(client, bearer)
    channel = bearer("channel")
    first = client.post(f"{API}/approvals", json={"token": token}, headers=channel)
    assert first.status_code == 202, first.text
    again = client.post(f"{API}/approvals", json={"token": token}, headers=channel)
    assert again.json() == first.json()
    attempt_id = first.json()["attempt_id"]
    assert first.json() == {
        "status": "execution_pending",
        "attempt_id": attempt_id,
        "attempt_revision": 1,
    }

    actor = bearer("actor", subject=PROVENANCE.actor_id)
    queued = client.get(f"{API}/execution-attempts/{attempt_id}", headers=actor)
    assert queued.status_code == 200 and queued.json()["status"] == "queued"
    assert ledger.effects is not None and ledger.effects.call_count() == 0

    assert run_worker(ledger, attempt_id) == "succeeded"
    done = client.get(f"{API}/execution-attempts/{attempt_id}", headers=actor).json()
    assert done["status"] == "succeeded"
    assert done["result"]["kind"] == "succeeded"
    assert set(done["result"]["receipt"]) == {"provider_id", "request_hash"}
    assert "Buy milk" not in str(done) and token not in str(done)
    assert "idk_" not in str(done)


@pytest.mark.usefixtures("directory")
def test_status_is_hidden_from_everyone_but_owner_and_admin(
    client: TestClient, bearer: Callable[..., Headers]
) -> None:
    token = propose_and_present(client, bearer)
    attempt_id = client.post(
        f"{API}/approvals", json={"token": token}, headers=bearer("channel")
    ).json()["attempt_id"]
    missing = client.get(f"{API}/execution-attempts/att_{'0' * 64}", headers=bearer("admin"))
    assert_error(missing, 404, "not_found")
    for headers in (
        bearer("actor", subject="mallory"),
        bearer("proposer"),
        bearer("channel", provenance=Provenance("bob", "ib", "cb", "c")),
    ):
        hidden = client.get(f"{API}/execution-attempts/{attempt_id}", headers=headers)
        assert hidden.status_code == 404
        assert hidden.content == missing.content
    for headers in (
        bearer("admin"),
        bearer("actor", subject=PROVENANCE.actor_id),
        bearer("channel"),
    ):
        assert (
            client.get(f"{API}/execution-attempts/{attempt_id}", headers=headers).status_code == 200
        )


@pytest.mark.usefixtures("directory")
def test_every_denied_approval_is_byte_identical_to_an_unknown_token(
    client: TestClient, bearer: Callable[..., Headers], admin: Headers
) -> None:
    unknown = client.post(f"{API}/approvals", json={"token": "nope"}, headers=bearer("channel"))
    assert_error(unknown, 404, "approval_unavailable")
    token = propose_and_present(client, bearer)
    wrong_callers = [
        Provenance(
            "bob",
            PROVENANCE.identity_binding_id,
            PROVENANCE.channel_binding_id,
            PROVENANCE.conversation_key,
        ),
        Provenance(
            PROVENANCE.actor_id,
            PROVENANCE.identity_binding_id,
            "cb-other",
            PROVENANCE.conversation_key,
        ),
        Provenance(
            PROVENANCE.actor_id,
            PROVENANCE.identity_binding_id,
            PROVENANCE.channel_binding_id,
            "C999",
        ),
    ]
    for who in wrong_callers:
        denied = client.post(
            f"{API}/approvals", json={"token": token}, headers=bearer("channel", provenance=who)
        )
        assert denied.status_code == 404
        assert denied.content == unknown.content
    client.put(
        f"{DIRECTORY}/actors/{PROVENANCE.actor_id}/permissions/tasks.write",
        json={"granted": False},
        headers=admin,
    )
    revoked = client.post(f"{API}/approvals", json={"token": token}, headers=bearer("channel"))
    assert revoked.content == unknown.content


@pytest.mark.usefixtures("directory")
def test_target_drift_answers_409_conflicted(
    client: TestClient, bearer: Callable[..., Headers], admin: Headers
) -> None:
    token = propose_and_present(client, bearer)
    client.put(f"{DIRECTORY}/targets/task:42", json={"revision": "r8"}, headers=admin)
    drift = client.post(f"{API}/approvals", json={"token": token}, headers=bearer("channel"))
    assert_error(drift, 409, "proposal_conflicted")


@pytest.mark.usefixtures("directory")
def test_only_channel_callers_approve_and_only_proposers_propose(
    client: TestClient, bearer: Callable[..., Headers]
) -> None:
    token = propose_and_present(client, bearer)
    for role in ("admin", "actor", "proposer"):
        assert_error(
            client.post(f"{API}/approvals", json={"token": token}, headers=bearer(role)),
            403,
            "forbidden",
        )
    for role in ("admin", "actor", "channel"):
        assert_error(
            client.post(
                f"{API}/proposals", headers=bearer(role), json={"actor_id": "alice", "spec": spec()}
            ),
            403,
            "forbidden",
        )


@pytest.mark.usefixtures("directory")
@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"actor_id": "alice", "spec": spec(permission="payments.send")}, "unknown_permission"),
        (
            {"actor_id": "alice", "spec": spec(executor_build="sha256:" + "00" * 32)},
            "executor_build_unavailable",
        ),
        ({"actor_id": "alice", "spec": {**spec(), "surprise": True}}, "invalid_input"),
        ({"actor_id": "alice", "spec": spec(content={"n": 1.5})}, "invalid_input"),
        ({"actor_id": "alice", "spec": spec(content={"x": "y" * 20000})}, "invalid_input"),
        ({"actor_id": "alice", "spec": spec(), "extra": 1}, "invalid_input"),
    ],
)
def test_bad_proposals_get_422_with_the_uniform_body(
    client: TestClient, bearer: Callable[..., Headers], body: dict[str, Any], code: str
) -> None:
    response = client.post(f"{API}/proposals", json=body, headers=bearer("proposer"))
    assert_error(response, 422, code)
    assert "y" * 50 not in response.text


@pytest.mark.usefixtures("directory")
def test_reconcile_and_resolve_are_admin_only_and_never_execute(
    client: TestClient, bearer: Callable[..., Headers], ledger: Ledger
) -> None:
    token = propose_and_present(
        client,
        bearer,
        capability="fake.operator_only",
        executor_build=fake_build_digest("fake.operator_only"),
        content={"simulate": "timeout_after_effect"},
    )
    attempt_id = client.post(
        f"{API}/approvals", json={"token": token}, headers=bearer("channel")
    ).json()["attempt_id"]
    assert run_worker(ledger, attempt_id) == "outcome_unknown"
    assert ledger.effects is not None
    calls = ledger.effects.call_count()
    url = f"{API}/execution-attempts/{attempt_id}"
    revision = client.get(url, headers=bearer("admin")).json()["revision"]
    resolve_body = {
        "expected_revision": revision,
        "resolution": "effect_applied",
        "reason": "provider console shows the task",
    }
    for role in ("actor", "channel", "proposer"):
        assert_error(
            client.post(f"{url}/resolve", json=resolve_body, headers=bearer(role)), 403, "forbidden"
        )
        assert_error(
            client.post(
                f"{url}/reconcile", json={"expected_revision": revision}, headers=bearer(role)
            ),
            403,
            "forbidden",
        )
    assert_error(
        client.post(
            f"{url}/reconcile", json={"expected_revision": revision}, headers=bearer("admin")
        ),
        409,
        "reconciler_unavailable",
    )
    assert_error(
        client.post(
            f"{url}/resolve",
            headers=bearer("admin"),
            json={**resolve_body, "provider_result": {"ok": True}},
        ),
        422,
        "invalid_input",
    )
    assert_error(
        client.post(
            f"{url}/resolve",
            headers=bearer("admin"),
            json={**resolve_body, "reason": "api_key=sk_live_abc"},
        ),
        422,
        "invalid_input",
    )
    assert_error(
        client.post(
            f"{url}/resolve",
            headers=bearer("admin"),
            json={**resolve_body, "expected_revision": revision - 1},
        ),
        409,
        "stale_revision",
    )
    resolved = client.post(f"{url}/resolve", json=resolve_body, headers=bearer("admin"))
    assert resolved.status_code == 200, resolved.text
    body = resolved.json()
    assert body["status"] == "manually_resolved"
    assert body["resolution"]["resolved_by"] == "tester"
    repeat = client.post(f"{url}/resolve", json=resolve_body, headers=bearer("admin"))
    assert repeat.json() == body
    other = client.post(
        f"{url}/resolve", headers=bearer("admin"), json={**resolve_body, "resolution": "no_effect"}
    )
    assert_error(other, 409, "not_outcome_unknown")
    assert ledger.effects.call_count() == calls
