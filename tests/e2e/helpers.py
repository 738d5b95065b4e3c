"""Constants and helpers shared by the HTTP and CLI tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from domain.services.approval import Provenance

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
        (f"/identity-bindings/{p.identity_binding_id}",
         {"actor_id": p.actor_id, "channel": "slack", "external_id": "U1", "active": True}),
        (f"/channel-bindings/{p.channel_binding_id}",
         {"conversation_key": p.conversation_key, "channel": "slack", "active": True}),
        (f"/actors/{p.actor_id}/permissions/tasks.write", {"granted": True}),
        ("/targets/task:42", {"revision": "r7"}),
    ]
    for capability, mode in FAKE_CAPABILITIES.items():
        puts.append((f"/executor-builds/{capability}/{fake_build_digest(capability)}",
                     {"delivery_mode": mode.value, "available": True}))
    return puts
