"""The SDK's own client session against ``ledger mcp --transport http``, on SQLite
and on the DynamoDB emulator: proposer bearer tokens only, the same call with the
same key is one proposal, an approved action runs once downstream, its redacted
status comes back, and ungated tools pass through."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from adapters.settings import load_settings
from api.embedded import Provenance, open_ledger
from api.http.auth import Role, mint_token
from tests.support.mcp_channel import Channel
from tests.support.mcp_world import (
    PROPOSER,
    Downstream,
    allow_everything,
    http_session,
    http_status,
    run,
    serving_http,
    structured,
    write_files,
)

pytestmark = pytest.mark.slow  # three processes: the downstream, ledger mcp, the test


def token(role: Role, subject: str = PROPOSER) -> str:
    return mint_token(load_settings(), subject=subject, role=role)


def test_an_agent_over_http_proposes_once_per_key_and_reads_the_result(
    tmp_path: Path, mcp_store: dict[str, str]
) -> None:
    downstream = Downstream(tmp_path / "tasks.db")
    try:
        with Channel("unset") as channel:
            files = write_files(tmp_path, mcp_store, channel.url, url=downstream.url)
            channel.secret = files.secret
            with open_ledger(start=False, **files.settings()) as admin:
                allow_everything(admin)
                with serving_http(files) as (url, _):
                    assert http_status(url, None) == 401
                    assert http_status(url, "not-a-token") == 401
                    assert http_status(url, token(Role.ADMIN)) == 403
                    assert http_status(url, token(Role.ACTOR, "alice")) == 403
                    status = run(_agent(url, channel, admin))
                inbox = admin.inbox("alice", status="claimed")
    finally:
        downstream.stop()
    assert len(inbox.items) == 1  # two calls with one key: one proposal
    assert status["status"] == "succeeded", status
    assert status["attempt"]["result"]["receipt"] == {"id": "task_1", "status": "created"}
    key = admin_key = next(iter(files.downstream.effects()))
    assert files.downstream.effects() == {admin_key: 1}
    assert files.downstream.requests() == {key: 1}


async def _agent(url: str, channel: Channel, admin: Any) -> dict[str, Any]:
    async with http_session(url, token(Role.PROPOSER)) as session:
        listing = structured(await session.call_tool("list_capabilities", {}))
        by_name = {c["capability"]: c for c in listing["capabilities"]}
        assert set(by_name) == {"tasks.create", "messages.send", "fake.provider_idempotency"}
        assert by_name["tasks.create"]["content_schema"]["required"] == ["title"]
        assert by_name["tasks.create"]["available"] is True
        assert listing["actors"] == ["alice"]
        call = {
            "capability": "tasks.create",
            "content": {"title": "Buy milk"},
            "actor": "alice",
            "idempotency_key": "call_0001",
        }
        first = structured(await session.call_tool("propose_action", call))
        again = structured(await session.call_tool("propose_action", call))
        assert first["status"] == again["status"] == "awaiting_approval", (first, again)
        assert first["proposal_id"] == again["proposal_id"]
        assert first["presentation_id"] == again["presentation_id"]
        assert "token" not in first and "preview" not in first
        shown = channel.wait_for(2)
        assert shown[0]["token"] == shown[1]["token"]  # the same presentation, delivered again
        other = structured(
            await session.call_tool("propose_action", {**call, "content": {"title": "Other"}})
        )
        assert other["error"] == "idempotency_key_refused", other
        wrong = structured(
            await session.call_tool("propose_action", {**call, "content": {"priority": 2}})
        )
        assert wrong["error"] == "invalid_input" and "at (the object) (required)" in wrong["detail"]
        admin.approve(shown[0]["token"], provenance=Provenance(**shown[0]["provenance"]))
        status = structured(
            await session.call_tool(
                "get_action_status", {"proposal_id": first["proposal_id"], "wait_seconds": 30}
            )
        )
        after = structured(await session.call_tool("propose_action", call))
        assert after["status"] == "claimed" and after["proposal_id"] == first["proposal_id"]
        tasks = await session.call_tool("list_tasks", {})  # passed through, outside the ledger
        assert tasks.structured_content == {"tasks": [{"id": "task_1", "status": "created"}]}
        return status
