"""The README's "Signed webhooks" runs exactly as written: a real `ledger serve`
delivers one signed webhook to the loopback receiver, lists it, and sends it again."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.ministack import REPO_ROOT, free_port

pytestmark = pytest.mark.slow  # subprocess servers


def webhooks_script() -> str:
    text = (REPO_ROOT / "README.md").read_text()
    block = re.search(
        r"<!-- webhooks:start -->\s*```sh\n(.*?)```\s*<!-- webhooks:end -->", text, re.S
    )
    assert block, "README webhooks markers not found"
    return block.group(1)


def test_the_readme_webhook_example_delivers_lists_and_redelivers(tmp_path: Path) -> None:
    for name in (".venv", "tests"):
        (tmp_path / name).symlink_to(REPO_ROOT / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(
        {"PORT": str(free_port()), "RECEIVER_PORT": str(free_port()), "PYTHONUNBUFFERED": "1"}
    )
    process = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", webhooks_script()],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=180)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
    log = tmp_path / "var" / "webhooks-serve.log"
    detail = out + err + (log.read_text() if log.exists() else "")
    assert process.returncode == 0, detail
    lines = out.strip().splitlines()
    assert lines[0] == "received: 1" and lines[-1] == "received: 2", detail
    body = json.loads(lines[1])
    assert (body["type"], body["status"]) == ("attempt.succeeded", "succeeded"), detail
    assert "Buy milk" not in out and "idk_" not in out
    assert lines[2] == "attempt.succeeded"
    listed = [line for line in lines if line.startswith("whd_") and " delivered " in line]
    assert len(listed) == 1 and " delivered attempt.succeeded att_" in listed[0], detail
    assert "subscription=chat attempts=1" in listed[0]
    assert f"{listed[0].split()[0]} pending: the running server sends it" in out
    entries = [
        json.loads(line) for line in (tmp_path / "var" / "received.jsonl").read_text().splitlines()
    ]
    assert [e["valid"] for e in entries] == [True, True]
    assert entries[0]["id"] == entries[1]["id"]  # the same webhook-id: a repeat
    secret_free = (tmp_path / "var" / "received.jsonl").read_text() + log.read_text()
    assert "whsec_" not in secret_free
