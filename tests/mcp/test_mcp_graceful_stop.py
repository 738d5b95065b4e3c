"""`SIGTERM` to a real ``ledger mcp --transport http`` while an agent's
``get_action_status`` calls wait (30 s): one for the actor's decision, one for
an approved attempt no worker runs (``--no-worker``). The stop answers both at
once with the status they see, in the shape of a wait that ran out, and the
process exits 0. The grace (5 s) is shorter than the waits: a stop that let
them wait on would cut them off at the grace, unanswered. Store-independent
(the waits are this process's): run on SQLite."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from adapters.settings import load_settings
from api.embedded import Provenance, open_ledger
from api.http.auth import Role, mint_token
from tests.support.mcp_channel import Channel
from tests.support.mcp_world import (
    PROPOSER,
    allow_everything,
    http_session,
    run,
    serving_http,
    structured,
    write_files,
)

pytestmark = pytest.mark.slow  # ledger mcp as a process, a downstream it starts, the test

GRACE_SECONDS = 5
WAIT_SECONDS = 30


def test_waits_open_at_sigterm_are_answered_at_once(tmp_path: Path) -> None:
    store = {"LEDGER_STORE": "sqlite", "LEDGER_SQLITE_PATH": str(tmp_path / "ledger.db")}
    with Channel("unset") as channel:
        files = write_files(tmp_path, store, channel.url, transport="stdio")
        files.extra_env["LEDGER_SHUTDOWN_GRACE_SECONDS"] = str(GRACE_SECONDS)
        channel.secret = files.secret
        with open_ledger(start=False, **files.settings()) as admin:  # no worker here either
            allow_everything(admin)
            with serving_http(files, "--no-worker") as (url, process):
                answers, signalled, answered = run(_agent(url, channel, admin, process))
                exit_status = process.wait(60)
                exited = time.monotonic()
    log = (tmp_path / "mcp-http.log").read_text()
    print(
        f"SIGTERM with 2 waits open: answered after {answered - signalled:.1f} s, "
        f"exit {exit_status} after {exited - signalled:.1f} s (grace {GRACE_SECONDS} s)"
    )
    assert exit_status == 0, log[-3000:]
    assert "SIGTERM: stopping" in log and "ledger: stopped" in log, log[-3000:]
    approved, undecided = answers
    assert approved["status"] == "queued" and approved["settled"] is False, approved
    assert approved["attempt"]["status"] == "queued"
    assert undecided["status"] == "awaiting_approval" and undecided["settled"] is False
    assert "attempt" not in undecided


async def _agent(
    url: str, channel: Channel, admin: Any, process: subprocess.Popen[Any]
) -> tuple[list[dict[str, Any]], float, float]:
    """Two proposals (the first approved), a 30 s wait on each, SIGTERM while they
    wait; their answers, when the signal was sent and when the last answer came."""
    token = mint_token(load_settings(), subject=PROPOSER, role=Role.PROPOSER)
    async with http_session(url, token) as session:
        ids = []
        for key in ("stop_0001", "stop_0002"):
            call = {
                "capability": "tasks.create",
                "content": {"title": f"Task {key}"},
                "actor": "alice",
                "idempotency_key": key,
            }
            proposed = structured(await session.call_tool("propose_action", call))
            assert proposed["status"] == "awaiting_approval", proposed
            ids.append(proposed["proposal_id"])
        shown = channel.wait_for(2)
        first = next(s for s in shown if s["proposal_id"] == ids[0])
        admin.approve(first["token"], provenance=Provenance(**first["provenance"]))
        answers: dict[int, dict[str, Any]] = {}
        signalled: list[float] = []

        async def wait_on(index: int) -> None:
            arguments = {"proposal_id": ids[index], "wait_seconds": WAIT_SECONDS}
            answers[index] = structured(await session.call_tool("get_action_status", arguments))

        with anyio.fail_after(WAIT_SECONDS + 30):
            async with anyio.create_task_group() as group:
                for index in range(len(ids)):
                    group.start_soon(wait_on, index)
                await anyio.sleep(2)  # sequencing only: let both calls reach the server first
                process.send_signal(signal.SIGTERM)
                signalled.append(time.monotonic())
        answered = time.monotonic()
    return [answers[index] for index in range(len(ids))], signalled[0], answered
