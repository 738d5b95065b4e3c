"""The README's "Put it in front of an agent" runs exactly as written: an MCP
client over stdio, two gated tools of a downstream server, approved in the
channel, each run once downstream, and the results read back."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.mcp_downstream import State
from tests.support.ministack import REPO_ROOT, free_port

pytestmark = pytest.mark.slow  # four processes: the ledger, the channel, ledger mcp, the tasks


def agent_script() -> str:
    text = (REPO_ROOT / "README.md").read_text()
    block = re.search(r"<!-- agent:start -->\s*```sh\n(.*?)```\s*<!-- agent:end -->", text, re.S)
    assert block, "README agent markers not found"
    return block.group(1)


def test_the_agent_section_runs_as_written(tmp_path: Path) -> None:
    for name in (".venv", "tests"):  # the script writes var/ where it runs
        (tmp_path / name).symlink_to(REPO_ROOT / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    ports = {name: str(free_port()) for name in ("PORT", "CHANNEL_PORT", "TASKS_PORT")}
    env |= {**ports, "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = str(tmp_path)  # `-m tests.support...` from the scratch copy
    out_path, err_path = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with out_path.open("w") as out, err_path.open("w") as err:
        process = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", agent_script()],
            cwd=tmp_path, env=env, stdout=out, stderr=err, text=True, start_new_session=True,
        )  # fmt: skip
        try:
            process.wait(timeout=180)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
    log = tmp_path / "var" / "agent" / "serve.log"
    detail = out_path.read_text() + err_path.read_text() + (log.read_text() if log.exists() else "")
    assert process.returncode == 0, detail
    lines = out_path.read_text().strip().splitlines()
    assert lines == [
        "['create_task', 'get_action_status', 'list_capabilities', 'list_tasks', "
        "'propose_action', 'send_message']",
        "create_task awaiting_approval",
        'create_task succeeded {"id": "task_1", "status": "created"}',
        "send_message awaiting_approval",
        'send_message succeeded {"id": "msg_2"}',
        "{'tasks': [{'id': 'task_1', 'status': 'created'}]}",
    ], detail
    state = State(tmp_path / "var" / "agent" / "tasks.db")
    assert sorted(state.effects().values()) == [1, 1]  # one effect per approved call
    assert sorted(state.requests().values()) == [1, 1]  # and one tools/call each
    assert "Bearer" not in log.read_text()
