"""docs/policies.md runs exactly as written: its worked examples (auto-approve
small tasks, forbid deletions, a standing grant, two people for payments over
500, escalating a payment nobody answered) in one shell, in document
order, over HTTP against ``ledger serve``, on SQLite and on the DynamoDB emulator."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.ministack import REPO_ROOT, free_port

DOC = REPO_ROOT / "docs" / "policies.md"
BLOCK = re.compile(r"<!-- (policies-[a-z-]+):start -->\s*```sh\n(.*?)```\s*<!-- \1:end -->", re.S)
NAMES = [
    "policies-setup",
    "policies-apply",
    "policies-small-task",
    "policies-deletion",
    "policies-grant",
    "policies-quorum",
    "policies-escalation",
    "policies-cleanup",
]

pytestmark = pytest.mark.slow  # a server process and a dozen CLI runs


def run_doc(workdir: Path, extra_env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    found = BLOCK.findall(DOC.read_text())
    assert [name for name, _ in found] == NAMES
    for name in (".venv", "tests"):
        (workdir / name).symlink_to(REPO_ROOT / name)
    script = "\n".join(f'echo "### {name}"\n{body}' for name, body in found)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update({"PORT": str(free_port()), "PYTHONUNBUFFERED": "1", **extra_env})
    process = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=workdir,
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
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def sections(stdout: str) -> dict[str, list[str]]:
    parts: dict[str, list[str]] = {}
    current = ""
    for line in stdout.splitlines():
        if line.startswith("### "):
            current = line[4:]
            parts[current] = []
        elif line.strip():
            parts[current].append(line)
    return parts


def answers(lines: list[str]) -> list[tuple[int, dict[str, Any]]]:
    """The (status, body) pairs ``propose`` printed, in order."""
    found = []
    for code, body in itertools.pairwise(lines):
        if re.fullmatch(r"\d{3}", code):
            found.append((int(code), json.loads(body)))
    return found


def check(result: subprocess.CompletedProcess[str], workdir: Path) -> None:
    log = workdir / "var" / "policies" / "serve.log"
    detail = result.stdout + result.stderr + (log.read_text()[-3000:] if log.exists() else "")
    assert result.returncode == 0, detail
    parts = sections(result.stdout)
    applied = "\n".join(parts["policies-apply"])
    assert "ok: 2 policies (1 auto-approving, 1 forbidding)" in applied, detail
    assert "3 passed, 0 failed" in applied and "+ small-tasks" in applied, detail
    assert re.search(r"applied: version 1, 2 policies, digest sha256:[0-9a-f]{64}", applied)

    small = parts["policies-small-task"]
    (claimed_code, claimed), (long_code, long_task) = answers(small)
    assert (claimed_code, claimed["status"]) == (201, "claimed"), detail
    assert claimed["approval"]["kind"] == "policy"
    assert claimed["approval"]["policy_id"] == "small-tasks"
    waited = json.loads(next(line for line in small if line.startswith('{"attempt_id"')))
    assert waited["status"] == "succeeded" and waited["approval"]["kind"] == "policy", detail
    assert (long_code, long_task["status"]) == (201, "presented")

    ((denied_code, denied),) = answers(parts["policies-deletion"])
    assert denied_code == 403 and denied["error"] == "policy_denied", detail
    assert "no-deletions" in denied["detail"]

    grant_lines = parts["policies-grant"]
    proposed = answers(grant_lines)
    assert [body["status"] for _, body in proposed] == ["claimed", "claimed", "presented"]
    assert sorted(body["approval"]["use"] for _, body in proposed[:2]) == [1, 2]
    assert all(body["approval"]["kind"] == "grant" for _, body in proposed[:2])
    assert re.search(r"sgr_[0-9a-f]{32} spent fake\.provider_idempotency uses=2/2", grant_lines[-1])

    quorum = parts["policies-quorum"]
    assert re.search(r"applied: version 2, 3 policies", "\n".join(quorum)), detail
    ((payment_code, payment),) = answers(quorum)
    assert (payment_code, payment["status"]) == (201, "presented"), detail
    bodies = [json.loads(line) for line in quorum if line.startswith("{")]
    decided = [b for b in bodies if b.get("status") in ("vote_recorded", "execution_pending")]
    first, again, last = decided
    assert (first["status"], first["votes"], first["required"]) == ("vote_recorded", 1, 2)
    assert (again["status"], again["votes"]) == ("vote_recorded", 1)  # bea never counts twice
    assert last["status"] == "execution_pending" and last["attempt_id"], detail
    view = next(b for b in bodies if "versions" in b)
    approval = view["versions"][0]["approval"]
    assert approval["kind"] == "quorum" and approval["approvers"] == ["bea", "carl"]
    assert (approval["group"], approval["required"]) == ("finance", 2)
    assert view["versions"][0]["votes"] == ["bea"]
    done = bodies[-1]
    assert done["status"] == "succeeded" and done["approval"]["kind"] == "quorum", detail
    escalation = parts["policies-escalation"]
    assert re.search(r"applied: version 3, 4 policies", "\n".join(escalation)), detail
    assert "leads" in escalation, detail  # the housekeeping pass escalated it
    ((small_code, small_payment),) = answers(escalation)
    assert (small_code, small_payment["status"]) == (201, "presented"), detail
    bodies = [json.loads(line) for line in escalation if line.startswith("{")]
    assert [b["status"] for b in bodies if "attempt_id" in b and "versions" not in b][-1] == (
        "execution_pending"
    ), detail
    view = bodies[-1]
    assert view["versions"][0]["escalated_to"] == "leads"
    approval = view["versions"][0]["approval"]
    assert approval["kind"] == "quorum" and approval["approvers"] == ["dana"], detail
    assert (approval["group"], approval["required"]) == ("leads", 1)
    assert [p["status"] for p in view["presentations"]] == ["revoked", "consumed"]
    text = log.read_text()
    assert "Water the plants" not in text and "Pay the supplier" not in text  # never logged


def test_the_policy_examples_run_on_sqlite(tmp_path: Path) -> None:
    check(run_doc(tmp_path, {}), tmp_path)


@pytest.mark.dynamodb
def test_the_policy_examples_run_on_dynamodb(
    tmp_path: Path, dynamodb_endpoint: str, dynamodb_table_name: str
) -> None:
    env = {
        "LEDGER_STORE": "dynamodb",
        "LEDGER_DYNAMODB_TABLE": dynamodb_table_name,
        "AWS_ENDPOINT_URL_DYNAMODB": dynamodb_endpoint,
        "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": dynamodb_endpoint,
        "AWS_DEFAULT_REGION": os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    check(run_doc(tmp_path, env), tmp_path)
