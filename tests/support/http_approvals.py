"""HTTP helpers of the process tests: tokens, the directory, one approval.

Tokens are minted with the development secret, which the server processes
started by the tests also use (no ``LEDGER_*`` variable reaches them).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from adapters.settings import load_settings
from api.http.auth import mint_token
from domain.services.approval import Provenance
from tests.support.factories import schema_digest_for

API = "/api/conversational"
DIGEST = "sha256:" + "ab" * 32


def headers(role: str, **kwargs: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {mint_token(load_settings(), role=role, **kwargs)}"}


WHO = Provenance("alice", "ib-alice", "cb-general", "C042")
CAPABILITY = "fake.provider_idempotency"


def set_up_directory(client: httpx.Client, builds: tuple[tuple[str, str, str], ...] = ()) -> None:
    """Admin PUTs that let ``WHO`` approve the provider-idempotent fake executor, and
    the executor ``builds`` given as (capability, build digest, delivery mode)."""
    from adapters.executors.fake import fake_build_digest

    admin = headers("admin", subject="root")
    puts: list[tuple[str, dict[str, Any]]] = [
        ("/actors/alice", {"enabled": True}),
        (
            "/identity-bindings/ib-alice",
            {"actor_id": "alice", "channel": "slack", "external_id": "U1", "active": True},
        ),
        (
            "/channel-bindings/cb-general",
            {"conversation_key": "C042", "channel": "slack", "active": True},
        ),
        ("/actors/alice/permissions/tasks.write", {"granted": True}),
        ("/targets/task:42", {"revision": "r7"}),
        (
            f"/executor-builds/{CAPABILITY}/{fake_build_digest(CAPABILITY)}",
            {"delivery_mode": "provider_idempotency", "available": True},
        ),
        *(
            (f"/executor-builds/{c}/{d}", {"delivery_mode": m, "available": True})
            for c, d, m in builds
        ),
    ]
    for path, body in puts:
        client.put(API + "/directory" + path, json=body, headers=admin).raise_for_status()


def approve_one(
    client: httpx.Client,
    n: int,
    *,
    capability: str = CAPABILITY,
    build: str | None = None,
    content: dict[str, Any] | None = None,
) -> str:
    """Propose, present and approve one task (by default of the provider-idempotent
    fake); the attempt id of the 202."""
    from adapters.executors.fake import fake_build_digest

    proposer = headers("proposer", subject="assistant")
    channel = headers("channel", subject="slack-bot", provenance=WHO)
    expires = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    spec = {
        "capability": capability,
        "executor_build": build or fake_build_digest(capability),
        "plugin_build": DIGEST,
        "schema_digest": schema_digest_for(capability),
        "policy_digest": DIGEST,
        "permission": "tasks.write",
        "effect": "create",
        "target": {"id": "task:42", "base_revision": "r7"},
        "destination": "tasks",
        "content": {"title": f"task {n}", **(content or {})},
        "sources": [f"message:{n}"],
        "expires_at": expires,
    }
    created = client.post(
        API + "/proposals", headers=proposer, json={"actor_id": "alice", "spec": spec}
    )
    created.raise_for_status()
    proposal_id = created.json()["proposal_id"]
    shown = client.post(
        f"{API}/proposals/{proposal_id}/presentations",
        headers=proposer,
        json={
            "version": 1,
            "identity_binding_id": WHO.identity_binding_id,
            "channel_binding_id": WHO.channel_binding_id,
            "conversation_key": WHO.conversation_key,
        },
    )
    shown.raise_for_status()
    approved = client.post(
        API + "/approvals", headers=channel, json={"token": shown.json()["token"]}
    )
    assert approved.status_code == 202, approved.text
    attempt_id: str = approved.json()["attempt_id"]
    return attempt_id
