"""The ``ledger`` command in-process, through typer's runner."""

from __future__ import annotations

from typing import Any

from typer.testing import CliRunner

from api.cli import app

runner = CliRunner()


def invoke(args: list[str], **env: str) -> Any:
    return runner.invoke(app, args, env=env, prog_name="ledger")
