"""The README tour runs exactly as written against a real `ledger serve`."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.e2e.test_serve_smoke import _free_port, _ledger_command, _wait_until_up

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def tour_script() -> str:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- tour:start -->\s*```sh\n(.*?)```\s*<!-- tour:end -->", text, re.S)
    assert block, "README tour markers not found"
    return block.group(1)


def test_readme_tour_carries_one_proposal_to_succeeded(tmp_path: Path) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update({"LEDGER_SQLITE_PATH": str(tmp_path / "ledger.db"), "PYTHONUNBUFFERED": "1"})
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        server = subprocess.Popen(
            [*_ledger_command(), "serve", "--port", str(port)],
            cwd=tmp_path, env=env, stdout=sink, stderr=subprocess.STDOUT,
        )
        try:
            _wait_until_up(server, f"http://127.0.0.1:{port}/healthz", log)
            tour = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", tour_script()],
                cwd=ROOT, capture_output=True, text=True, timeout=120,
                env={**env, "API": f"http://127.0.0.1:{port}/api/conversational"},
            )
        finally:
            server.terminate()
            server.wait(timeout=15)
    assert tour.returncode == 0, tour.stdout + tour.stderr
    lines = tour.stdout.strip().splitlines()
    assert '"status":"succeeded"' in lines[-1], tour.stdout
    assert '{"error":"approval_unavailable","detail":"This approval is not available."}' in (
        tour.stdout)
    assert sum('"status":"execution_pending"' in line for line in lines) == 1
    assert "Buy milk" not in lines[-1]
    second = next(line for line in lines if line.startswith("second: "))
    first_id, retried_id = second.removeprefix("second: ").split(", retried: ")
    assert first_id == retried_id, second  # one Idempotency-Key, one proposal
    assert any(first_id == line for line in lines), "the inbox did not list it"
    assert any('"status":"declined"' in line for line in lines), tour.stdout
    assert "declined" in lines
    assert lines.count("canceled") == 2  # the retried cancel answers the same
