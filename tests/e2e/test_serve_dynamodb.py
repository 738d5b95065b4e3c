"""`ledger serve` on a DynamoDB emulator: the README's set-up runs as written,
and an unreachable streams endpoint stops start-up with one line."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.support.dynamodb_fixtures import new_table_name
from tests.support.http_server import free_port, ledger_command, wait_until_up
from tests.support.ministack import REPO_ROOT

pytestmark = pytest.mark.dynamodb


def emulator_script(name: str = "emulator") -> str:
    text = (REPO_ROOT / "README.md").read_text()
    block = re.search(rf"<!-- {name}:start -->\s*```sh\n(.*?)```\s*<!-- {name}:end -->", text, re.S)
    assert block, f"README {name} markers not found"
    return block.group(1)


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("LEDGER_", "AWS_"))} | {
        "PYTHONUNBUFFERED": "1"
    }


def test_the_readme_emulator_setup_serves_on_dynamodb(
    dynamodb_endpoint: str, tmp_path: Path
) -> None:
    port = free_port()
    env = _clean_env() | {
        "EMULATOR": dynamodb_endpoint,
        "PORT": str(port),
        "LEDGER_DYNAMODB_TABLE": new_table_name(),
    }
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        shell = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", emulator_script()],
            cwd=REPO_ROOT,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            wait_until_up(shell, f"http://127.0.0.1:{port}/healthz", log)
            assert httpx.get(f"http://127.0.0.1:{port}/readyz").json()["status"] == "ready"
        finally:
            os.killpg(shell.pid, signal.SIGTERM)  # the shell and the server it started
            shell.wait(timeout=15)
    assert "store: dynamodb table" in log.read_text()


@pytest.mark.slow
def test_the_readme_migration_moves_a_table_made_before_the_layout(dynamodb_client: object) -> None:
    """The README's layout block, run as written on a table without a layout record."""
    from adapters.dynamodb.layout import layout_key
    from adapters.dynamodb.schema import create_table

    name = new_table_name()
    create_table(dynamodb_client, name)  # type: ignore[arg-type]
    dynamodb_client.delete_item(TableName=name, Key=layout_key())  # type: ignore[attr-defined]
    setup = emulator_script().replace(".venv/bin/ledger dynamodb create-table\n", "")
    setup = setup.replace(".venv/bin/ledger serve --port ${PORT:-8000}\n", "")
    try:
        ran = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", setup + emulator_script("emulator-layout")],
            cwd=REPO_ROOT,
            env=_clean_env()
            | {"EMULATOR": os.environ.get("EMULATOR", ""), "LEDGER_DYNAMODB_TABLE": name}
            | {"EMULATOR": dynamodb_client.meta.endpoint_url},  # type: ignore[attr-defined]
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        dynamodb_client.delete_table(TableName=name)  # type: ignore[attr-defined]
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.strip().splitlines()
    before, after = lines[0], lines[-1]
    assert len(lines) == 4, lines  # layout, the migration's before and after, layout
    assert "head buckets 16, directory shards 0" in before and "not recorded" in before
    assert "head buckets 512, directory shards 16, policy-set shards 96" in after
    assert "due buckets not recorded" in before and "due buckets 256" in after
    assert "grant use shards 0" in before and "grant use shards 256" in after
    assert "checks read shard copies" in after


@pytest.mark.parametrize("command", [["serve", "--port", "1"], ["worker"]])
def test_an_unreachable_streams_endpoint_stops_start_up_in_one_line(
    dynamodb_endpoint: str, command: list[str]
) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    env = _clean_env() | {
        "LEDGER_STORE": "dynamodb",
        "AWS_ENDPOINT_URL_DYNAMODB": dynamodb_endpoint,
        "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": closed,
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    done = subprocess.run(
        [*ledger_command(), *command], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: cannot reach the DynamoDB Streams endpoint {closed}")
    assert "AWS_ENDPOINT_URL_DYNAMODB_STREAMS" in lines[0]
