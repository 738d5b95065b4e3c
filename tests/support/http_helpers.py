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
from tests.support.factories import schema_digest_for

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


ERROR_KEYS = frozenset({"error", "detail"})
FIELD_ERROR_KEYS = ERROR_KEYS | {"errors", "error_count"}


def assert_error_body(body: Any, status: int | None = None) -> None:
    """The uniform error body: ``error`` and ``detail``, and, on an error about the
    request's fields (a 422 or a 400 of the parser), ``errors`` (each failing
    field's pointer, message and location, at most 50) with ``error_count``."""
    assert isinstance(body, dict), body
    assert isinstance(body.get("error"), str) and body["error"], body
    assert isinstance(body.get("detail"), str) and body["detail"], body
    if set(body) == ERROR_KEYS:
        return
    assert set(body) == FIELD_ERROR_KEYS, body
    assert status in (None, 400, 422), (status, body)
    errors, count = body["errors"], body["error_count"]
    assert isinstance(errors, list) and 1 <= len(errors) <= 50, body
    assert isinstance(count, int) and count >= len(errors), body
    assert count == len(errors) or len(errors) == 50, body
    for item in errors:
        assert set(item) == {"pointer", "message", "location"}, item
        assert isinstance(item["pointer"], str) and isinstance(item["message"], str), item
        assert item["message"] and item["location"] in {"body", "query", "path", "header"}, item
        assert item["pointer"] == "" or item["pointer"].startswith("/"), item


def assert_error(response: Any, status: int, code: str) -> None:
    """The response is the uniform error body with this status and code."""
    assert response.status_code == status, response.text
    body = response.json()
    assert_error_body(body, status)
    assert body["error"] == code, body


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
        "schema_digest": schema_digest_for(capability),
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
