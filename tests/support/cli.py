"""The ``ledger`` command in-process, through typer's runner."""

from __future__ import annotations

from typing import Any

from typer.testing import CliRunner

from api.cli import app

runner = CliRunner()


def invoke(args: list[str], **env: str) -> Any:
    return runner.invoke(app, args, env=env, prog_name="ledger")


def assert_one_line_failure(result: Any, *fragments: str) -> None:
    assert result.exit_code != 0
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0]
