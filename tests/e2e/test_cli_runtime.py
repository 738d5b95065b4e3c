"""The runtime commands: demo, fake-executors, recover, and help on each."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.executors.fake import FAKE_CAPABILITIES, fake_build_digest
from tests.support.cli import invoke


@pytest.mark.parametrize("command", ["serve", "worker", "recover", "demo", "fake-executors"])
def test_every_runtime_command_has_help(command: str) -> None:
    result = invoke([command, "--help"])
    assert result.exit_code == 0
    assert "Usage" in result.stdout


def test_fake_executors_prints_one_line_each() -> None:
    result = invoke(["fake-executors"], LEDGER_STORE="memory")
    assert result.exit_code == 0
    lines = result.stdout.strip().splitlines()
    assert lines == [
        f"{capability} {fake_build_digest(capability)} {mode.value}"
        for capability, mode in FAKE_CAPABILITIES.items()
    ]


def test_demo_tells_the_whole_story() -> None:
    result = invoke(["demo"])
    assert result.exit_code == 0, result.stdout
    out = result.stdout
    assert "one attempt: True" in out
    assert "manually_resolved" in out
    assert "no idempotency key has more than one effect: True" in out


def test_recover_once_reports_and_exits(tmp_path: Path) -> None:
    result = invoke(["recover", "--once"], LEDGER_SQLITE_PATH=str(tmp_path / "l.db"))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "recovery: examined 0 due attempts"


def test_recover_with_bad_settings_fails_in_one_line() -> None:
    result = invoke(["recover", "--once"], LEDGER_LEASE_SECONDS="1")
    assert result.exit_code != 0
    assert "LEDGER_LEASE_SECONDS" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_recover_refuses_when_execution_is_disabled(tmp_path: Path) -> None:
    result = invoke(
        ["recover", "--once"],
        LEDGER_SQLITE_PATH=str(tmp_path / "l.db"),
        LEDGER_EXECUTION_ENABLED="false",
    )
    assert result.exit_code == 1
    assert "execution is disabled" in result.stderr
