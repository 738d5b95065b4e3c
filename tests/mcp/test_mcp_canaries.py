"""Secret canaries of ``ledger mcp`` (I10): the presentation token, the presenter's
secret, a downstream server's header secret, what a downstream answers beyond the
receipt's pointers, the agent's own bearer token and the values of refused input
never appear in any MCP message the agent receives, nor in the server's log. The
search is proven to find the token where it belongs: in the channel's deliveries."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from adapters.settings import load_settings
from api.embedded import Provenance, open_ledger
from api.http.auth import Role, mint_token
from tests.support.mcp_channel import Channel
from tests.support.mcp_downstream import NOTE_ENV
from tests.support.mcp_world import (
    PROPOSER,
    Downstream,
    allow_everything,
    http_session,
    run,
    serving_http,
    structured,
    write_files,
)

pytestmark = pytest.mark.slow  # three processes: the downstream, ledger mcp, the test

RUN = uuid.uuid4().hex[:12].upper()
CANARIES = {
    "header_secret": f"Bearer sk_live_HEADER{RUN}",
    "downstream_note": f"sk_live_NOTE{RUN}",
    "refused_value": f"sk_live_VALUE{RUN}",
    "refused_capability": f"sk_live_CAP{RUN}",
}


def test_no_secret_reaches_the_agent_or_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TASKS_TOKEN", CANARIES["header_secret"])  # the admin ledger reads it too
    store = {"LEDGER_STORE": "sqlite", "LEDGER_SQLITE_PATH": str(tmp_path / "ledger.db")}
    downstream = Downstream(tmp_path / "tasks.db", env={NOTE_ENV: CANARIES["downstream_note"]})
    messages: list[str] = []
    try:
        with Channel("unset") as channel:
            files = write_files(tmp_path, store, channel.url, url=downstream.url)
            files.executors.write_text(
                files.executors.read_text().replace(
                    'ungated = "pass"',
                    'ungated = "pass"\nheaders = { Authorization = "env:TASKS_TOKEN" }',
                )
            )
            files.extra_env["TASKS_TOKEN"] = CANARIES["header_secret"]
            channel.secret = files.secret
            bearer = mint_token(load_settings(), subject=PROPOSER, role=Role.PROPOSER)
            with open_ledger(start=False, **files.settings()) as admin:
                allow_everything(admin)
                with serving_http(files) as (url, _):
                    status = run(_agent(url, bearer, channel, admin, messages))
    finally:
        downstream.stop()

    assert status["status"] == "succeeded", status
    assert status["attempt"]["result"]["receipt"] == {"id": "task_1", "status": "created"}
    [shown] = channel.received
    secrets = {
        **CANARIES,
        "presentation_token": shown["token"],
        "presenter_secret": files.secret,
        "agent_bearer": bearer,
    }
    log = (tmp_path / "mcp-http.log").read_text()
    assert "ledger mcp on http" in log  # the log is the server's
    outputs = {"mcp messages": "\n".join(messages), "server log": log}
    leaks = [(name, where) for name, value in secrets.items() for where, text in outputs.items()
             if value in text]  # fmt: skip
    assert leaks == []
    # The same search finds the token in what the channel received: it would find a leak.
    assert secrets["presentation_token"] in json.dumps(channel.received)
    assert len(messages) >= 8  # initialize and every call answered


async def _agent(
    url: str, bearer: str, channel: Channel, admin: Any, messages: list[str]
) -> dict[str, Any]:
    async with http_session(url, bearer, record=messages) as session:
        await session.list_tools()
        await session.call_tool("list_capabilities", {})
        refused = [
            await session.call_tool(
                "create_task", {"title": "Buy milk", "priority": CANARIES["refused_value"]}
            ),
            await session.call_tool(
                "propose_action",
                {"capability": CANARIES["refused_capability"], "content": {}, "actor": "alice"},
            ),
        ]
        assert [structured(r)["error"] for r in refused] == ["invalid_input"] * 2
        proposed = structured(await session.call_tool("create_task", {"title": "Buy milk"}))
        [shown] = channel.wait_for(1)
        admin.approve(shown["token"], provenance=Provenance(**shown["provenance"]))
        status = structured(
            await session.call_tool(
                "get_action_status", {"proposal_id": proposed["proposal_id"], "wait_seconds": 30}
            )
        )
        await session.call_tool("get_action_status", {"proposal_id": proposed["proposal_id"]})
        return status
