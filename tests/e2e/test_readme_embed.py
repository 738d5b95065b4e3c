"""The README's "Embed it" runs exactly as written, in a process of its own, in
memory, on SQLite (a temporary file) and on the DynamoDB emulator; its "Test
with it" example is a test that passes. The embedding takes at most three
import lines."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.ministack import REPO_ROOT

MAX_IMPORT_LINES = 3


def readme_block(name: str) -> str:
    text = (REPO_ROOT / "README.md").read_text()
    block = re.search(
        rf"<!-- {name}:start -->\s*```python\n(.*?)```\s*<!-- {name}:end -->", text, re.S
    )
    assert block, f"README {name} markers not found"
    return block.group(1)


def import_lines(code: str) -> list[str]:
    return [line for line in code.splitlines() if re.match(r"(from \S+ )?import ", line)]


def run_embedded(workdir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("LEDGER_", "AWS_"))}
    clean.update(env, PYTHONPATH=str(REPO_ROOT))
    script = workdir / "embed.py"
    script.write_text(readme_block("embed"))
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=workdir,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_embedding_takes_at_most_three_import_lines() -> None:
    found = import_lines(readme_block("embed"))
    assert 1 <= len(found) <= MAX_IMPORT_LINES, found
    assert "from api.embedded import Provenance, open_ledger" in found


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_the_embed_example_approves_and_waits_for_the_result(store: str, tmp_path: Path) -> None:
    env = {"LEDGER_STORE": store}
    if store == "sqlite":
        env["LEDGER_SQLITE_PATH"] = str(tmp_path / "embedded.db")
    result = run_embedded(tmp_path, **env)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0] == "execution_pending"
    assert lines[1].startswith("succeeded {'provider_id': 'fake_"), lines
    assert "Buy milk" not in result.stdout + result.stderr  # content never leaves in a view
    if store == "sqlite":
        assert (tmp_path / "embedded.db").exists()
        # opened again on the same file: the directory puts change nothing, and
        # the second proposal gets its own attempt
        again = run_embedded(tmp_path, **env)
        assert again.returncode == 0, again.stdout + again.stderr
        assert again.stdout.strip().splitlines()[1].startswith("succeeded")


@pytest.mark.dynamodb
def test_the_embed_example_runs_on_the_dynamodb_emulator(
    tmp_path: Path, dynamodb_endpoint: str, dynamodb_table_name: str
) -> None:
    result = run_embedded(
        tmp_path,
        LEDGER_STORE="dynamodb",
        LEDGER_DYNAMODB_TABLE=dynamodb_table_name,
        AWS_ENDPOINT_URL_DYNAMODB=dynamodb_endpoint,
        AWS_ENDPOINT_URL_DYNAMODB_STREAMS=dynamodb_endpoint,
        AWS_ACCESS_KEY_ID="local",
        AWS_SECRET_ACCESS_KEY="local",
        AWS_DEFAULT_REGION="us-east-1",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0] == "execution_pending"
    assert lines[1].startswith("succeeded {'provider_id': 'fake_"), lines


def test_the_testing_example_is_a_passing_test() -> None:
    code = readme_block("testing")
    assert len(import_lines(code)) <= MAX_IMPORT_LINES
    namespace: dict[str, Any] = {}
    exec(compile(code, "README.md#testing", "exec"), namespace)
    tests = [value for name, value in namespace.items() if name.startswith("test_")]
    assert tests
    for test in tests:
        test()
