"""Small builders shared by the unit tests: a valid spec and digests."""

from __future__ import annotations

from copy import deepcopy
from datetime import UTC, datetime
from typing import Any

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def digest(char: str) -> str:
    """A well-formed ``sha256:`` digest made of one repeated hex character."""
    return "sha256:" + char * 64


def schema_digest_for(capability: str) -> str:
    """The ``schema_digest`` a spec for a build of ``capability`` names at propose:
    a fake's own, else that of a build without a content schema (the tests'
    ``http`` builds and plugins declare none)."""
    from adapters.executors.fake import FAKE_CAPABILITIES, fake_schema_digest
    from adapters.executors.registry import NO_SCHEMA_DIGEST

    return fake_schema_digest(capability) if capability in FAKE_CAPABILITIES else NO_SCHEMA_DIGEST


def spec_data(**overrides: Any) -> dict[str, Any]:
    """The wire-format example of design.md 2.1, with overrides applied."""
    data: dict[str, Any] = {
        "capability": "fake.provider_idempotency",
        "executor_build": digest("a"),
        "plugin_build": digest("b"),
        "schema_digest": digest("c"),
        "policy_digest": digest("d"),
        "permission": "tasks.write",
        "effect": "create",
        "target": {"id": "task:42", "base_revision": "r7"},
        "destination": "tasks",
        "content": {"title": "Buy milk"},
        "sources": ["message:123"],
        "expires_at": "2026-12-01T00:00:00Z",
    }
    data.update(deepcopy(overrides))
    return data
