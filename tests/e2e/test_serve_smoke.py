"""`ledger serve` as a real process: it listens, serves /docs and keeps data in SQLite."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx
import pytest

from adapters.bootstrap import build_ledger
from adapters.settings import load_settings
from api.http.auth import mint_token
from domain.directory import DirectoryKind, actor_record_id
from domain.services.directory import get_record
from tests.support.http_helpers import DIRECTORY
from tests.support.http_server import free_port, ledger_command, wait_until_up

pytestmark = pytest.mark.slow


def test_ledger_serve_answers_and_persists_to_sqlite(tmp_path: Path) -> None:
    port = free_port()
    db_path = tmp_path / "state" / "ledger.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(
        {"LEDGER_STORE": "sqlite", "LEDGER_SQLITE_PATH": str(db_path), "PYTHONUNBUFFERED": "1"}
    )
    out_log, err_log = tmp_path / "stdout.log", tmp_path / "stderr.log"
    base = f"http://127.0.0.1:{port}"
    with out_log.open("wb") as out, err_log.open("wb") as err:
        process = subprocess.Popen(
            [*ledger_command(), "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=err,
        )
        try:
            wait_until_up(process, base + "/healthz", err_log)
            assert httpx.get(base + "/docs").status_code == 200
            assert httpx.get(base + "/openapi.json").json()["info"]["title"]
            assert httpx.get(base + "/readyz").json()["status"] == "ready"
            token = mint_token(load_settings(), subject="root", role="admin")
            response = httpx.put(
                base + DIRECTORY + "/actors/alice",
                json={"enabled": True},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert response.status_code == 200, response.text
            assert response.json()["revision"] == 1
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)

    first_line = out_log.read_text().splitlines()[0]
    assert f"http://127.0.0.1:{port}" in first_line
    assert str(db_path) in first_line

    ledger = build_ledger(load_settings(store="sqlite", sqlite_path=str(db_path)))
    try:
        record = get_record(ledger.store, DirectoryKind.ACTOR, actor_record_id("alice"))
    finally:
        ledger.close()
    assert record.values == {"enabled": True}
