"""The README's "Connect a real system" runs exactly as written, in production mode,
against the reference provider, on SQLite and on the DynamoDB emulator."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.ministack import REPO_ROOT, free_port

pytestmark = pytest.mark.slow  # subprocess servers and real timeouts


def connect_script() -> str:
    text = (REPO_ROOT / "README.md").read_text()
    block = re.search(
        r"<!-- connect:start -->\s*```sh\n(.*?)```\s*<!-- connect:end -->", text, re.S
    )
    assert block, "README connect markers not found"
    return block.group(1)


def run_connect(workdir: Path, extra_env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # The script writes var/ relative to where it runs: a scratch copy of the layout it needs.
    for name in (".venv", "tests"):
        (workdir / name).symlink_to(REPO_ROOT / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(
        {
            "PORT": str(free_port()),
            "PROVIDER_PORT": str(free_port()),
            "PYTHONUNBUFFERED": "1",
            **extra_env,
        }
    )
    out_path, err_path = workdir / "stdout.txt", workdir / "stderr.txt"
    with out_path.open("w") as out, err_path.open("w") as err:
        process = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", connect_script()],
            cwd=workdir,
            env=env,
            stdout=out,
            stderr=err,
            text=True,
            start_new_session=True,
        )
        try:
            process.wait(timeout=180)
        finally:
            # The script kills what it started; if it stopped half-way, stop its group.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
    return subprocess.CompletedProcess(
        process.args, process.returncode, out_path.read_text(), err_path.read_text()
    )


def check(result: subprocess.CompletedProcess[str], workdir: Path) -> None:
    log = workdir / "var" / "serve.log"
    detail = result.stdout + result.stderr + (log.read_text() if log.exists() else "")
    assert result.returncode == 0, detail
    lines = result.stdout.strip().splitlines()
    executors = [line for line in lines if line.startswith("tasks.create sha256:")]
    assert len(executors) == 2 and executors[0] == executors[1]
    assert executors[0].endswith(" provider_idempotency http current")
    assert "effects at the provider: 1" in lines  # the provider's own counter
    # content the build's schema refuses: a 422 naming both failing fields
    refused = json.loads(next(line for line in lines if line.startswith('{"error"')))
    assert refused["error"] == "invalid_spec" and refused["error_count"] == 2, refused
    assert sorted(e["pointer"] for e in refused["errors"]) == [
        "/spec/content/titel",
        "/spec/content/title",
    ]
    assert '"status":"succeeded"' in lines[-1], detail
    assert '"receipt":{"id":"task_1","status":"created"}' in lines[-1]
    assert "Buy milk" not in lines[-1]
    assert "ok: 1 executors" in result.stderr and "no request was sent" in result.stderr
    served = log.read_text()
    assert "Bearer" not in served and "idk_" not in served


def test_connect_a_real_system_on_sqlite(tmp_path: Path) -> None:
    check(run_connect(tmp_path, {}), tmp_path)


@pytest.mark.dynamodb
def test_connect_a_real_system_on_dynamodb(
    tmp_path: Path, dynamodb_endpoint: str, dynamodb_table_name: str
) -> None:
    env: dict[str, Any] = {
        "LEDGER_STORE": "dynamodb",
        "LEDGER_DYNAMODB_TABLE": dynamodb_table_name,
        "AWS_ENDPOINT_URL_DYNAMODB": dynamodb_endpoint,
        "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": dynamodb_endpoint,
        "AWS_DEFAULT_REGION": os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
    }
    if not os.environ.get("AWS_ACCESS_KEY_ID"):
        env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    check(run_connect(tmp_path, env), tmp_path)
