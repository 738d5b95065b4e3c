"""The ledger's HTTP API as the deployed stack serves it, behind the emulator's
HTTP API: tokens (RS256, the template's only algorithm), the directory, one
proposal taken to an approval.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from adapters.settings import load_settings
from api.http.auth import mint_token
from domain.services.approval import Provenance
from tests.support.factories import schema_digest_for

API = "/api/conversational"
CAPABILITY = "tasks.create"
WHO = Provenance("alice", "ib-alice", "cb-kitchen", "conv-42")
TOKEN_VARIABLE = "LEDGER_EXECUTOR_SECRET_1"  # what the template fills from Secrets Manager


def executors_toml(provider_url: str) -> str:
    """One build of the http executor against the reference provider (as the README's)."""
    return (
        "[[http]]\n"
        f'capability = "{CAPABILITY}"\n'
        'delivery_mode = "provider_idempotency"\n'
        f'url = "{provider_url}/v1/{{destination}}"\n'
        'method = "POST"\n'
        'idempotency_header = "Idempotency-Key"\n'
        "timeout_seconds = 10\n"
        f'headers = {{ Authorization = "env:{TOKEN_VARIABLE}" }}\n'
        'receipt = ["/id", "/status"]\n'
    )


def rsa_key_pair() -> tuple[Any, str]:
    """A fresh signing key and its PEM public half (the AuthRs256PublicKey parameter)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return key, public


@dataclass
class DeployedApi:
    """httpx against the emulator's gateway, addressed to one HTTP API by its Host."""

    client: httpx.Client
    key: Any

    @classmethod
    def open(cls, emulator_url: str, api_id: str, port: int, ca_file: str, key: Any) -> DeployedApi:
        client = httpx.Client(
            base_url=emulator_url + API,
            timeout=60,
            verify=ssl.create_default_context(cafile=ca_file),
            headers={"Host": f"{api_id}.execute-api.localhost:{port}"},
        )
        return cls(client, key)

    def token(self, role: str, subject: str, provenance: Provenance | None = None) -> str:
        return mint_token(
            load_settings(),
            subject=subject,
            role=role,
            provenance=provenance,
            key=self.key,
            algorithm="RS256",
            ttl_seconds=900,
        )

    def call(
        self,
        method: str,
        path: str,
        role: str,
        subject: str,
        *,
        provenance: Provenance | None = None,
        body: Any = None,
        expect: int = 200,
    ) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self.token(role, subject, provenance)}"}
        answer = self.client.request(method, path, headers=headers, json=body)
        if answer.status_code != expect:
            raise AssertionError(
                f"{method} {path}: HTTP {answer.status_code} (wanted {expect}): {answer.text[:300]}"
            )
        found: dict[str, Any] = answer.json() if answer.content else {}
        return found

    def seed_directory(self, build: str) -> int:
        """The admin PUTs that let alice approve ``build`` of the executor; how many."""
        puts: list[tuple[str, dict[str, Any]]] = [
            ("/actors/alice", {"enabled": True}),
            (
                "/identity-bindings/ib-alice",
                {
                    "actor_id": "alice",
                    "channel": "chat",
                    "external_id": "alice@chat",
                    "active": True,
                },
            ),
            (
                "/channel-bindings/cb-kitchen",
                {"conversation_key": "conv-42", "channel": "chat", "active": True},
            ),
            ("/actors/alice/permissions/tasks.write", {"granted": True}),
            (
                f"/executor-builds/{CAPABILITY}/{build}",
                {"delivery_mode": "provider_idempotency", "available": True},
            ),
        ]
        for path, body in puts:
            self.call("PUT", "/directory" + path, "admin", "ops", body=body)
        return len(puts)

    def approve(self, build: str, title: str) -> str:
        """Propose, present and approve one task; the attempt id of the 202."""
        expires = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        digest = "sha256:" + "ab" * 32
        spec = {
            "capability": CAPABILITY,
            "executor_build": build,
            "plugin_build": digest,
            "schema_digest": schema_digest_for(CAPABILITY),
            "policy_digest": digest,
            "permission": "tasks.write",
            "effect": "create",
            "destination": "tasks",
            "content": {"title": title},
            "sources": [f"message:{title}"],
            "expires_at": expires,
        }
        proposal = self.call(
            "POST",
            "/proposals",
            "proposer",
            "assistant-backend",
            body={"actor_id": "alice", "spec": spec},
            expect=201,
        )
        shown = self.call(
            "POST",
            f"/proposals/{proposal['proposal_id']}/presentations",
            "proposer",
            "assistant-backend",
            expect=201,
            body={
                "version": 1,
                "identity_binding_id": WHO.identity_binding_id,
                "channel_binding_id": WHO.channel_binding_id,
                "conversation_key": WHO.conversation_key,
            },
        )
        approved = self.call(
            "POST",
            "/approvals",
            "channel",
            "chat-backend",
            provenance=WHO,
            body={"token": shown["token"]},
            expect=202,
        )
        attempt_id: str = approved["attempt_id"]
        return attempt_id

    def status(self, attempt_id: str) -> dict[str, Any]:
        return self.call("GET", f"/execution-attempts/{attempt_id}", "actor", "alice")
