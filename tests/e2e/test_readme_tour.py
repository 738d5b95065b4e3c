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


# A `date` as BSD and macOS have it: no GNU `-d`. The tour must not need one.
BSD_DATE = """#!/bin/sh
for arg in "$@"; do
  case "$arg" in -d|-d*|--date*) echo "date: illegal option -- d" >&2; exit 1;; esac
done
exec /bin/date "$@"
"""


def test_readme_tour_runs_twice_against_one_server(tmp_path: Path) -> None:
    """The tour verbatim, twice in a row against one server (the second run in a
    shell of its own, as a reader would run it again), with a BSD `date` on the
    PATH; then, in the second run's shell, the audit digest block."""
    shims = tmp_path / "bsd"
    shims.mkdir()
    (shims / "date").write_text(BSD_DATE)
    (shims / "date").chmod(0o755)
    bsd_path = f"{shims}{os.pathsep}{os.environ.get('PATH', '')}"
    marker = "=== audit tour ==="
    first, second, observe = run_tour(
        tmp_path,
        [tour_script(), f"{tour_script()}\necho '{marker}'\n{tour_script('audit-tour')}"],
        PATH=bsd_path,
        CHECKPOINT_PORT=str(free_port()),
    )
    check_tour(first)
    assert second.returncode == 0, second.stdout + second.stderr
    main, audit = second.stdout.split(marker + "\n")
    check_tour(subprocess.CompletedProcess(second.args, 0, main, second.stderr))
    oks = [line for line in audit.splitlines() if line.startswith("ok: ")]
    assert len(oks) == 4, audit
    assert "extends the digest of" in oks[1] and "is covered by the digest" in oks[2], audit
    for run in (first, second):
        assert "Traceback" not in run.stderr and "unexpected answer" not in run.stderr, run.stderr
    # the second run made new proposals and a new attempt: nothing was replayed
    assert proposal_ids(first).isdisjoint(proposal_ids(second)), (first.stdout, second.stdout)
    check_observe(observe)


def proposal_ids(run: subprocess.CompletedProcess[str]) -> set[str]:
    return set(re.findall(r"prop_[0-9a-f]{32}", run.stdout))


def run_tour(
    tmp_path: Path, scripts: list[str], **extra: str
) -> list[subprocess.CompletedProcess[str]]:
    """Each script in a shell of its own against one `ledger serve`, then the
    README's observability block; their results in that order."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update({"LEDGER_SQLITE_PATH": str(tmp_path / "ledger.db"), "PYTHONUNBUFFERED": "1"})
    log = tmp_path / "serve.log"
    runs: list[subprocess.CompletedProcess[str]] = []
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
            for script in scripts:
                runs.append(
                    subprocess.run(
                        ["bash", "-euo", "pipefail", "-c", script],
                        cwd=ROOT,
                        capture_output=True,
                        text=True,
                        timeout=120,
                        env={**env, **extra, "API": f"http://127.0.0.1:{port}/api/conversational"},
                    )
                )
            runs.append(
                subprocess.run(
                    ["bash", "-euo", "pipefail", "-c", tour_script("observe")],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    timeout=60,
                    env={**env, "BASE": f"http://127.0.0.1:{port}"},
                )
            )
        finally:
            server.terminate()
            server.wait(timeout=15)
    return runs


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
