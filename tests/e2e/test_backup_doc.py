"""docs/backup.md runs as written (issue 25.6): its backup block while the ledger
serves, then its restore procedure, around the scenario of the issue.

21 attempts (7 per delivery mode) are approved while execution is off; the
backup is taken; the ledger runs them all (succeeded) and a checkpoint is taken;
then the documented restore. Afterwards: 0 second effects at the (fake)
provider, every operator-only attempt ``outcome_unknown``, and the audit check
names every attempt stream the restore lost.
"""

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

pytestmark = pytest.mark.slow  # real processes; about 20 s of real time

PER_MODE = 7


def block(name: str) -> str:
    text = (REPO_ROOT / "docs" / "backup.md").read_text()
    found = re.search(rf"<!-- {name}:start -->\s*```sh\n(.*?)```\s*<!-- {name}:end -->", text, re.S)
    assert found, f"docs/backup.md: {name} markers not found"
    return found.group(1)


def script() -> str:
    return f"""
LEDGER=.venv/bin/ledger
PY=.venv/bin/python
wait_for() {{
  for i in $(seq 1 300); do curl -sf "$1" > /dev/null && return; sleep 0.1; done; return 1
}}
export LEDGER_SQLITE_PATH=var/ledger.db LEDGER_AUDIT_CHECKPOINT_DIR=var/checkpoints
export LEDGER_RECOVERY_INTERVAL_SECONDS=1 LEDGER_LEASE_SECONDS=5
# the lookup fake's settle window: its restored attempts are looked up a few seconds
# after the restore instead of the default 30 s (the lease bounds it from below)
export LEDGER_FAKE_SETTLE_SECONDS=2
mkdir -p var
LEDGER_EXECUTION_ENABLED=false $LEDGER serve --port $PORT > var/serve-1.log 2>&1 &
LEDGER_PID=$!
wait_for http://127.0.0.1:$PORT/readyz
$PY -m tests.support.backup_scenario approve --port $PORT --per-mode {PER_MODE} > var/attempts.txt
echo "=== backup ==="
{block("backup")}
echo "=== run ==="
kill "$LEDGER_PID"; wait "$LEDGER_PID" 2>/dev/null || true
$LEDGER serve --port $PORT > var/serve-2.log 2>&1 &
LEDGER_PID=$!
wait_for http://127.0.0.1:$PORT/readyz
$PY -m tests.support.backup_scenario wait --attempts var/attempts.txt --status succeeded
$PY -m tests.support.backup_scenario checkpoint > /dev/null
echo "=== restore ==="
{block("restore")}
echo "=== after ==="
wait_for http://127.0.0.1:$PORT/readyz
$PY -m tests.support.backup_scenario settle --attempts var/attempts.txt --seconds 120
kill "$LEDGER_PID"
"""


def run(workdir: Path) -> subprocess.CompletedProcess[str]:
    for name in (".venv", "tests"):
        (workdir / name).symlink_to(REPO_ROOT / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update({"PORT": str(free_port()), "PYTHONUNBUFFERED": "1"})
    out_path, err_path = workdir / "stdout.txt", workdir / "stderr.txt"
    with out_path.open("w") as out, err_path.open("w") as err:
        process = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", script()],
            cwd=workdir,
            env=env,
            stdout=out,
            stderr=err,
            text=True,
            start_new_session=True,
        )
        try:
            process.wait(timeout=300)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
    return subprocess.CompletedProcess(
        process.args, process.returncode, out_path.read_text(), err_path.read_text()
    )


def test_the_backup_procedure_repeats_no_effect(tmp_path: Path) -> None:
    result = run(tmp_path)
    logs = "".join(p.read_text() for p in sorted((tmp_path / "var").glob("serve*.log")))
    assert result.returncode == 0, result.stdout + result.stderr + logs
    sections = dict(
        zip(
            ["setup", "backup", "run", "restore", "after"],
            re.split(r"^=== \w+ ===$\n", result.stdout, flags=re.M),
            strict=True,
        )
    )
    attempts = dict(
        line.split() for line in (tmp_path / "var" / "attempts.txt").read_text().splitlines()
    )
    assert len(attempts) == 3 * PER_MODE

    # the backup was taken while the ledger served
    assert re.search(r"^backup of var/ledger.db written to var/backups/ledger-", sections["backup"])

    # the restore recorded what it found and settled it
    restore = sections["restore"]
    assert "restore rst_" in restore
    assert f"{3 * PER_MODE} attempts unsettled at the restored point" in restore
    for mode in attempts.values():
        assert f"{PER_MODE} {mode} (" in restore
    # the audit check names what the restore lost: every attempt stream
    verify = [line for line in restore.splitlines() if line.startswith("att_")]
    assert {line.split(":")[0] for line in verify} == set(attempts), restore
    assert all(re.search(r"\d+ events in the digest, \d+ now \(\d+ lost\)", v) for v in verify)
    assert "behind the digest" in result.stderr and "was recorded at" in result.stderr

    report = json.loads(sections["after"].strip().splitlines()[-1])
    assert all(row["effects"] == 1 for row in report.values()), report  # 0 second effects
    by_mode: dict[str, set[str]] = {}
    for row in report.values():
        by_mode.setdefault(row["mode"], set()).add(row["status"])
    assert by_mode["operator_reconciliation_only"] == {"outcome_unknown"}
    assert by_mode["provider_idempotency"] == {"succeeded"}
    assert by_mode["correlation_lookup"] == {"succeeded"}
    for row in report.values():
        if row["mode"] != "provider_idempotency":
            assert row["calls"] == 1, row  # never dispatched again
