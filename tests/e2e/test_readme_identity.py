"""The README's "Identity providers" runs exactly as written: a real `ledger serve`
trusts a loopback provider's key set; a Telegram bot registered as a channel
service approves for alice, a Slack app cannot, and a token for another
audience is refused."""

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


def identity_script() -> str:
    text = (REPO_ROOT / "README.md").read_text()
    block = re.search(
        r"<!-- identity:start -->\s*```sh\n(.*?)```\s*<!-- identity:end -->", text, re.S
    )
    assert block, "README identity markers not found"
    return block.group(1)


def test_the_readme_identity_provider_example_runs(tmp_path: Path) -> None:
    for name in (".venv", "tests"):
        (tmp_path / name).symlink_to(REPO_ROOT / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update({"PORT": str(free_port()), "IDP_PORT": str(free_port()), "PYTHONUNBUFFERED": "1"})
    process = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", identity_script()],
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
    log = tmp_path / "var" / "identity-serve.log"
    detail = out + err + (log.read_text() if log.exists() else "")
    assert process.returncode == 0, detail
    assert out.strip().splitlines() == [
        "succeeded",
        '{"error":"approval_unavailable","detail":"This approval is not available."}',
        "401",
    ], detail
    assert "warning:" not in err, detail  # every variable it sets is a setting
