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


class FixedClock:
    """A clock that never moves."""

    def now(self) -> datetime:
        return FIXED_NOW


def assert_error(response: Any, status: int, code: str) -> None:
    """The response is the uniform error body with this status and code."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "detail"}, body
    assert body["error"] == code, body
    assert isinstance(body["detail"], str) and body["detail"]
