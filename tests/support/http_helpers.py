"""Constants and helpers shared by the HTTP and CLI tests: the uniform error check,
the directory that lets PROVENANCE approve, a valid spec, propose-and-present."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger
from adapters.executors.fake import fake_build_digest
from domain.services.approval import Provenance
from domain.services.execution import Worker, WorkerPolicy

FIXED_NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
FIXED_NOW_TEXT = "2026-03-01T12:00:00Z"
DIRECTORY = "/api/conversational/directory"
PROVENANCE = Provenance(
    actor_id="alice",
    identity_binding_id="ib-alice-slack",
    channel_binding_id="cb-general",
    conversation_key="C042",
)

Headers = dict[str, str]


def assert_error(response: Any, status: int, code: str) -> None:
    """The response is the uniform error body with this status and code."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "detail"}, body
    assert body["error"] == code, body
    assert isinstance(body["detail"], str) and body["detail"]


def directory_puts() -> list[tuple[str, dict[str, Any]]]:
    """Admin PUTs that make PROVENANCE able to approve every fake executor's proposals."""
    from adapters.executors.fake import FAKE_CAPABILITIES, fake_build_digest

    p = PROVENANCE
    puts: list[tuple[str, dict[str, Any]]] = [
        (f"/actors/{p.actor_id}", {"enabled": True}),
        (
            f"/identity-bindings/{p.identity_binding_id}",
            {"actor_id": p.actor_id, "channel": "slack", "external_id": "U1", "active": True},
        ),
        (
            f"/channel-bindings/{p.channel_binding_id}",
            {"conversation_key": p.conversation_key, "channel": "slack", "active": True},
        ),
        (f"/actors/{p.actor_id}/permissions/tasks.write", {"granted": True}),
        ("/targets/task:42", {"revision": "r7"}),
    ]
    for capability, mode in FAKE_CAPABILITIES.items():
        puts.append(
            (
                f"/executor-builds/{capability}/{fake_build_digest(capability)}",
                {"delivery_mode": mode.value, "available": True},
            )
        )
    return puts


API = "/api/conversational"
DIGEST = "sha256:" + "ab" * 32


def spec(capability: str = "fake.provider_idempotency", **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "capability": capability,
        "executor_build": fake_build_digest(capability),
        "plugin_build": DIGEST,
        "schema_digest": DIGEST,
        "policy_digest": DIGEST,
        "permission": "tasks.write",
        "effect": "create",
        "target": {"id": "task:42", "base_revision": "r7"},
        "destination": "tasks",
        "content": {"title": "Buy milk"},
        "sources": ["message:123"],
        "expires_at": "2026-12-01T00:00:00Z",
    }
    body.update(changes)
    return body


def propose_and_present(
    client: TestClient, bearer: Callable[..., Headers], **spec_changes: Any
) -> str:
    proposer = bearer("proposer", subject="assistant-backend")
    created = client.post(
        f"{API}/proposals",
        headers=proposer,
        json={"actor_id": PROVENANCE.actor_id, "spec": spec(**spec_changes)},
    )
    assert created.status_code == 201, created.text
    body = created.json()
    assert set(body) == {"proposal_id", "version", "payload_hash", "view_hash", "preview", "status"}
    shown = client.post(
        f"{API}/proposals/{body['proposal_id']}/presentations",
        headers=proposer,
        json={
            "version": 1,
            "identity_binding_id": PROVENANCE.identity_binding_id,
            "channel_binding_id": PROVENANCE.channel_binding_id,
            "conversation_key": PROVENANCE.conversation_key,
        },
    )
    assert shown.status_code == 201, shown.text
    assert shown.headers["cache-control"] == "no-store"
    token: str = shown.json()["token"]
    return token


def run_worker(ledger: Ledger, attempt_id: str) -> str:
    """What the runtime's worker loop does: process, then project the stream."""
    outcome = Worker(ledger.context, WorkerPolicy()).process(attempt_id).value
    ledger.projector.project_attempt(attempt_id)
    return outcome
