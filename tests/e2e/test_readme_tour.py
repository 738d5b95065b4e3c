"""The README tour runs exactly as written against a real `ledger serve`."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.http_server import free_port, ledger_command, wait_until_up

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def tour_script(name: str = "tour") -> str:
    text = (ROOT / "README.md").read_text()
    block = re.search(rf"<!-- {name}:start -->\s*```sh\n(.*?)```\s*<!-- {name}:end -->", text, re.S)
    assert block, f"README {name} markers not found"
    return block.group(1)


def test_readme_tour_carries_one_proposal_to_succeeded(tmp_path: Path) -> None:
    """The tour, then (same shell, same server) the audit digest block, both verbatim."""
    marker = "=== audit tour ==="
    tour, observe = run_tour(
        tmp_path,
        f"{tour_script()}\necho '{marker}'\n{tour_script('audit-tour')}",
        CHECKPOINT_PORT=str(free_port()),
    )
    assert tour.returncode == 0, tour.stdout + tour.stderr
    main, audit = tour.stdout.split(marker + "\n")
    check_tour(subprocess.CompletedProcess(tour.args, 0, main, tour.stderr))
    oks = [line for line in audit.splitlines() if line.startswith("ok: ")]
    assert len(oks) == 4, audit
    assert "extends the digest of" in oks[1] and "is covered by the digest" in oks[2], audit
    check_observe(observe)


def run_tour(
    tmp_path: Path, script: str, **extra: str
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update({"LEDGER_SQLITE_PATH": str(tmp_path / "ledger.db"), "PYTHONUNBUFFERED": "1"})
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        server = subprocess.Popen(
            [*ledger_command(), "serve", "--port", str(port)],
            cwd=tmp_path,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_until_up(server, f"http://127.0.0.1:{port}/healthz", log)
            tour = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", script],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=120,
                env={**env, **extra, "API": f"http://127.0.0.1:{port}/api/conversational"},
            )
            observe = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", tour_script("observe")],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=60,
                env={**env, "BASE": f"http://127.0.0.1:{port}"},
            )
        finally:
            server.terminate()
            server.wait(timeout=15)
    return tour, observe


def check_tour(tour: subprocess.CompletedProcess[str]) -> None:
    assert tour.returncode == 0, tour.stdout + tour.stderr
    lines = tour.stdout.strip().splitlines()
    assert '"status":"succeeded"' in lines[-2], tour.stdout
    assert '"status":"ready"' in lines[-1] and '"events_behind"' in lines[-1], tour.stdout
    assert '{"error":"approval_unavailable","detail":"This approval is not available."}' in (
        tour.stdout
    )
    assert sum('"status":"execution_pending"' in line for line in lines) == 1
    assert "Buy milk" not in lines[-2]
    second = next(line for line in lines if line.startswith("second: "))
    first_id, retried_id = second.removeprefix("second: ").split(", retried: ")
    assert first_id == retried_id, second  # one Idempotency-Key, one proposal
    assert any(first_id == line for line in lines), "the inbox did not list it"
    assert any('"status":"declined"' in line for line in lines), tour.stdout
    assert "declined" in lines
    assert lines.count("canceled") == 2  # the retried cancel answers the same


def check_observe(observe: subprocess.CompletedProcess[str]) -> None:
    """The README's observability block, run against the same server after the tour."""
    assert observe.returncode == 0, observe.stdout + observe.stderr
    assert re.search(r'^ledger_attempts\{status="succeeded"\} [1-9]', observe.stdout, re.M), (
        observe.stdout
    )
    assert re.search(r'^ledger_approvals_total\{result="refused"\} [1-9]', observe.stdout, re.M), (
        observe.stdout
    )
