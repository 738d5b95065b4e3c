"""docs/operations.md runs exactly as written: every embedded procedure (execution
off and on, a setting change with 10 queued attempts and 10 open presentations,
a rollback, dropping a drained build, a code upgrade beside the old version) in
one shell, in document order, on SQLite and on the DynamoDB emulator; 0 lost. The
AWS procedures name only parameters the template declares."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.ministack import REPO_ROOT, free_port
from tests.support.sam_template import load_template

DOC = REPO_ROOT / "docs" / "operations.md"
BLOCK = re.compile(r"<!-- (ops-[a-z-]+):start -->\s*```sh\n(.*?)```\s*<!-- \1:end -->", re.S)


def blocks() -> list[tuple[str, str]]:
    found = BLOCK.findall(DOC.read_text())
    assert [name for name, _ in found][:2] == ["ops-setup", "ops-execution-off"], found
    assert found[-1][0] == "ops-cleanup"
    return found


def run_doc(workdir: Path, extra_env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    for name in (".venv", "tests"):
        (workdir / name).symlink_to(REPO_ROOT / name)
    script = "\n".join(f'echo "### {name} $(date +%s)"\n{body}' for name, body in blocks())
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(
        {
            "PORT": str(free_port()),
            "NEXT_PORT": str(free_port()),
            "PROVIDER_PORT": str(free_port()),
            "LEDGER_RECOVERY_INTERVAL_SECONDS": "1",  # the doc waits for recovery ticks
            "PYTHONUNBUFFERED": "1",
            **extra_env,
        }
    )
    out_path, err_path = workdir / "stdout.txt", workdir / "stderr.txt"
    with out_path.open("w") as out, err_path.open("w") as err:
        process = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=workdir,
            env=env,
            stdout=out,
            stderr=err,
            text=True,
            start_new_session=True,
        )
        try:
            process.wait(timeout=240)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
    return subprocess.CompletedProcess(
        process.args, process.returncode, out_path.read_text(), err_path.read_text()
    )


def check(result: subprocess.CompletedProcess[str], workdir: Path) -> None:
    logs = "".join(p.read_text() for p in (workdir / "var" / "ops").glob("*.log"))
    detail = result.stdout + result.stderr + logs[-4000:]
    assert result.returncode == 0, detail
    out = result.stdout
    assert "pending: 10 approved, 10 presentations open" in out, detail
    # the setting change's check: both builds kept, the pending work on the draining one
    assert re.search(
        r"tasks\.create sha256:[0-9a-f]{64} draining: available in the directory; "
        r"10 queued attempts and 10 open presentations",
        result.stderr,
    ), detail
    assert "refused: 422 executor_build_draining" in out
    for total in (21, 22, 26):  # after execution on, the rollback, the code upgrade
        assert (
            f"succeeded={total} failed_safe=0 outcome_unknown=0 queued=0 executing=0; "
            f"provider: {total} keys, at most 1 effect(s) per key"
        ) in out, detail
    assert "executor_not_registered" not in logs


pytestmark = pytest.mark.slow  # server processes restarted several times


def test_the_operations_procedures_run_on_sqlite(tmp_path: Path) -> None:
    check(run_doc(tmp_path, {}), tmp_path)


@pytest.mark.dynamodb
def test_the_operations_procedures_run_on_dynamodb(
    tmp_path: Path, dynamodb_endpoint: str, dynamodb_table_name: str
) -> None:
    env: dict[str, Any] = {
        "LEDGER_STORE": "dynamodb",
        "LEDGER_DYNAMODB_TABLE": dynamodb_table_name,
        "AWS_ENDPOINT_URL_DYNAMODB": dynamodb_endpoint,
        "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": dynamodb_endpoint,
        "AWS_DEFAULT_REGION": os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    check(run_doc(tmp_path, env), tmp_path)


def aws_section() -> str:
    text = DOC.read_text()
    return text[text.index("## On AWS") :]


def test_the_aws_procedures_name_only_template_parameters() -> None:
    declared = set(load_template()["Parameters"])
    section = aws_section()
    overrides = re.findall(r"--parameter-overrides((?:\s+\\?\s*[A-Za-z0-9]+=\S+)+)", section)
    named = {pair.split("=")[0] for found in overrides for pair in re.findall(r"\w+=\S+", found)}
    assert {"ExecutionEnabled", "ExecutorsFile", "WaitingForBuildSeconds"} <= named
    assert named <= declared, named - declared
    # every parameter named in the prose (CamelCase in backticks) exists too
    mentioned = set(re.findall(r"`([A-Z][a-z]+(?:[A-Z0-9][a-z0-9]*)+)`", section))
    assert mentioned - {"TableName"} <= declared, mentioned - declared
    outputs = set(load_template()["Outputs"])
    assert "TableName" in outputs
