"""`ledger executors` and `ledger executors check` (design.md 11.1), and start-up failures of
every entry point when the executors are broken."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.cli import app
from tests.support.http_executors import executors_toml
from tests.support.http_server import ledger_command
from tests.support.ministack import REPO_ROOT
from tests.support.provider_fixtures import Provider

runner = CliRunner()
PROD = {"LEDGER_ENV": "production", "LEDGER_AUTH_HS256_SECRET": "p" * 40}


def invoke(args: list[str], **env: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, args, env={"LEDGER_STORE": "memory", **env}, prog_name="ledger")


def one_line_error(result, *fragments: str) -> str:  # type: ignore[no-untyped-def]
    assert result.exit_code == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0]
    return str(lines[0])


@pytest.mark.parametrize("args", [["executors", "--help"], ["executors", "check", "--help"]])
def test_the_executors_commands_have_help(args: list[str]) -> None:
    result = invoke(args)
    assert result.exit_code == 0
    assert "<capability> <build_digest> <delivery_mode>" in result.stdout or (
        "env:" in result.stdout
    )


def test_development_lists_the_fakes_with_their_kind() -> None:
    result = invoke(["executors"])
    assert result.exit_code == 0
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 3
    assert all(line.endswith(" fake current") and len(line.split()) == 5 for line in lines)


def test_production_lists_the_http_executors_and_never_a_fake(
    tmp_path: Path, provider: Provider
) -> None:
    path = tmp_path / "executors.toml"
    path.write_text(executors_toml(provider.url))
    result = invoke(
        ["executors"],
        LEDGER_EXECUTORS_FILE=str(path),
        TASKS_TOKEN=f"Bearer {provider.token}",
        **PROD,
    )
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert [line.split()[0] for line in lines] == ["tasks.create", "tasks.lookup", "tasks.operator"]
    assert [line.split()[2:] for line in lines] == [
        ["provider_idempotency", "http", "current"],
        ["correlation_lookup", "http", "current"],
        ["operator_reconciliation_only", "http", "current"],
    ]
    assert "fake" not in result.stdout


def test_production_with_no_executors_says_so() -> None:
    result = invoke(["executors"], **PROD)
    assert result.exit_code == 0 and result.stdout == ""
    assert "no executors are registered" in result.stderr


def test_check_resolves_every_variable_and_sends_nothing(
    tmp_path: Path, provider: Provider
) -> None:
    path = tmp_path / "executors.toml"
    path.write_text(executors_toml(provider.url))
    before = provider._get("/_effects")
    result = invoke(
        ["executors", "check"],
        LEDGER_EXECUTORS_FILE=str(path),
        TASKS_TOKEN=f"Bearer {provider.token}",
        **PROD,
    )
    assert result.exit_code == 0, result.stderr
    assert len(result.stdout.strip().splitlines()) == 3
    assert "ok: 3 executors" in result.stderr and "no request was sent" in result.stderr
    after = provider._get("/_effects")
    assert (after["requests"], after["lookups"], after["connections"]) == (
        before["requests"],
        before["lookups"],
        before["connections"],
    )
    assert provider.token not in result.stdout + result.stderr


def test_check_names_a_missing_variable_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "executors.toml"
    path.write_text(executors_toml("http://127.0.0.1:9"))
    one_line_error(
        invoke(["executors", "check"], LEDGER_EXECUTORS_FILE=str(path), **PROD),
        "LEDGER_EXECUTORS_FILE executors.toml: [[http]] #1 (tasks.create): "
        "headers.Authorization: environment variable TASKS_TOKEN is not set",
    )


def test_fakes_stay_refused_in_production() -> None:
    one_line_error(
        invoke(["executors"], LEDGER_FAKE_EXECUTORS="true", **PROD),
        "LEDGER_ENV=production refuses LEDGER_FAKE_EXECUTORS=true",
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        ["serve", "--port", "1"],
        ["worker"],
        ["recover", "--once"],
        ["executors"],
        ["audit", "att_x"],
    ],
)
def test_every_entry_point_stops_at_start_up_on_a_bad_file(
    tmp_path: Path, command: list[str]
) -> None:
    path = tmp_path / "executors.toml"
    path.write_text(
        '[[http]]\ncapability = "tasks.create"\ndelivery_mode = "provider_idempotency"'
        '\nurl = "tasks.internal/v1"\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(LEDGER_EXECUTORS_FILE=str(path), LEDGER_SQLITE_PATH=str(tmp_path / "l.db"))
    run = subprocess.run(
        [*ledger_command(), *command],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1
    assert run.stderr.strip() == (
        "error: invalid settings: LEDGER_EXECUTORS_FILE executors.toml: "
        "[[http]] #1 (tasks.create): url: needs an http:// or https:// "
        "scheme"
    ) or run.stderr.strip().endswith(
        "[[http]] #1 (tasks.create): url: needs an http:// or https:// scheme"
    ), run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "l.db").exists()


@pytest.mark.slow
def test_the_example_plugin_is_listed_by_ledger_executors(
    example_plugin_path: Path, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(
        PYTHONPATH=f"{example_plugin_path}:{REPO_ROOT}",
        LEDGER_STORE="memory",
        LEDGER_EXAMPLE_NOTES_FILE=str(tmp_path / "notes.jsonl"),
    )
    run = subprocess.run(
        [*ledger_command(), "executors"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    notes = [line for line in run.stdout.splitlines() if line.startswith("notes.append ")]
    assert len(notes) == 1
    assert notes[0].split()[2:] == ["provider_idempotency", "example-notes", "current"]
    # a broken plugin (its variable unset) stops start-up, naming it
    del env["LEDGER_EXAMPLE_NOTES_FILE"]
    run = subprocess.run(
        [*ledger_command(), "executors"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1
    assert run.stderr.strip() == (
        "error: executor plugin 'example-notes' (ledger_example_plugin:executors) failed: "
        "RuntimeError: LEDGER_EXAMPLE_NOTES_FILE is not set"
    )
