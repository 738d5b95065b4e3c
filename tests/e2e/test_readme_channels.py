"""The README's "Approve in the chat" runs exactly as written: its three blocks in
one shell start a real `ledger serve`, the fake Telegram and Slack servers and
both channel services; Alice approves in Telegram, Bob declines in Slack, and
each message ends showing the outcome."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.ministack import REPO_ROOT, free_port

pytestmark = pytest.mark.slow  # subprocess servers

BLOCKS = ("channels-ledger", "channels-telegram", "channels-slack")


def channels_script() -> str:
    text = (REPO_ROOT / "README.md").read_text()
    parts = []
    for name in BLOCKS:
        block = re.search(
            rf"<!-- {name}:start -->\s*```sh\n(.*?)```\s*<!-- {name}:end -->", text, re.S
        )
        assert block, f"README {name} markers not found"
        parts.append(block.group(1))
    return "\n".join(parts)


def test_the_readme_channels_approve_in_telegram_and_decline_in_slack(tmp_path: Path) -> None:
    for name in (".venv", "tests"):
        (tmp_path / name).symlink_to(REPO_ROOT / name)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LEDGER_", "TELEGRAM_", "SLACK_", "AWS_"))
    }
    ports = ("PORT", "TELEGRAM_PORT", "SLACK_PORT", "BOT_API_PORT", "SLACK_API_PORT")
    env.update({name: str(free_port()) for name in ports})
    env["PYTHONUNBUFFERED"] = "1"
    process = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", channels_script()],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=240)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
    var = tmp_path / "var"
    logs = {p.name: p.read_text(errors="replace") for p in var.glob("*.log")}
    detail = out + err + "\n".join(f"--- {k}\n{v}" for k, v in logs.items())
    assert process.returncode == 0, detail
    webhook = f"http://127.0.0.1:{env['TELEGRAM_PORT']}/telegram/updates"
    told = re.fullmatch(
        rf"updates go to {re.escape(webhook)}\nsent\nApproved\.\n(?P<telegram>.*?)\n\n"
        r"Approved\. Done: it succeeded\.\nsent\nDeclined\.\n(?P<slack>.*?)\n"
        r"Declined\. Nothing will be done\.\n",
        out,
        re.S,
    )
    assert told, detail
    assert "Buy milk" in told["telegram"] and "Book the room" in told["slack"], detail
    # the redaction canaries: no token or secret in any log or anything the fakes got
    everything = "\n".join(logs.values()) + "".join(p.read_text() for p in var.glob("fake-*.jsonl"))
    assert "whsec_" not in everything and "xoxb-" not in everything
    assert "Buy milk" not in logs["telegram-channel.log"] + logs["slack-channel.log"]
