"""The SDK's own client session against ``ledger mcp`` over stdio: the tools, a
gated call proposed, presented to the actor's channel (never to the agent),
approved there, run once downstream, and its result read back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from api.embedded import Provenance, open_ledger
from tests.support.mcp_channel import Channel
from tests.support.mcp_world import allow_everything, run, stdio_session, structured, write_files

pytestmark = pytest.mark.slow  # a ledger mcp process and a downstream process per call


def test_a_gated_call_over_stdio_runs_once_after_approval(tmp_path: Path) -> None:
    store = {"LEDGER_STORE": "sqlite", "LEDGER_SQLITE_PATH": str(tmp_path / "ledger.db")}
    with Channel("unset") as channel:
        files = write_files(tmp_path, store, channel.url, transport="stdio")
        channel.secret = files.secret
        with open_ledger(start=False, **files.settings()) as admin:
            allow_everything(admin)

            async def agent() -> dict[str, Any]:
                async with stdio_session(files) as session:
                    names = {tool.name for tool in (await session.list_tools()).tools}
                    assert names == {
                        "list_capabilities",
                        "propose_action",
                        "get_action_status",
                        "create_task",
                        "send_message",
                        "list_tasks",
                    }
                    proposed = structured(
                        await session.call_tool("create_task", {"title": "Buy milk"})
                    )
                    assert proposed["status"] == "awaiting_approval", proposed
                    [shown] = channel.wait_for(1)
                    assert shown["proposal_id"] == proposed["proposal_id"]
                    admin.approve(shown["token"], provenance=Provenance(**shown["provenance"]))
                    return structured(
                        await session.call_tool(
                            "get_action_status",
                            {"proposal_id": proposed["proposal_id"], "wait_seconds": 30},
                        )
                    )

            status = run(agent())
    assert status["status"] == "succeeded", status
    assert status["attempt"]["result"]["receipt"] == {"id": "task_1", "status": "created"}
    assert list(files.downstream.effects().values()) == [1]
    assert list(files.downstream.requests().values()) == [1]
