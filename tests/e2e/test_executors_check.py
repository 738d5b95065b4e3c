"""`ledger executors check` against the store: what switching to a file would do to
the pending work (queued attempts, open presentations), on an SQLite ledger."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from adapters.bootstrap import build_ledger
from adapters.settings import load_settings
from domain.directory import DirectoryKind, executor_build_record_id
from domain.services.approval import approve
from domain.services.directory import put_record
from domain.services.proposals import present, propose
from tests.support.cli import invoke
from tests.support.clocks import FixedClock
from tests.support.http_executors import TOKEN_VARIABLE
from tests.support.provider_fixtures import Provider
from tests.support.worlds.approval import World, base_spec

CAPABILITY = "tasks.create"


def entry(url: str, timeout: int, *, draining: bool = False) -> str:
    return (
        f'[[http]]\ncapability = "{CAPABILITY}"\ndelivery_mode = "provider_idempotency"\n'
        f'url = "{url}/v1/{{destination}}"\ntimeout_seconds = {timeout}\n'
        f'headers = {{ Authorization = "env:{TOKEN_VARIABLE}" }}\n'
        + ("draining = true\n" if draining else "")
    )


@pytest.fixture
def pending(tmp_path: Path, provider: Provider, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """An SQLite ledger on the file's first build: 2 queued attempts, 5 open presentations."""
    monkeypatch.setenv(TOKEN_VARIABLE, f"Bearer {provider.token}")
    first = tmp_path / "executors.toml"
    first.write_text(entry(provider.url, 10))
    db = str(tmp_path / "ledger.db")
    settings = load_settings(store="sqlite", sqlite_path=db, executors_file=str(first))
    ledger = build_ledger(settings, clock=FixedClock())
    try:
        assert isinstance(ledger.clock, FixedClock)
        world = World(ledger.store, clock=ledger.clock)
        (old,) = [e.build_digest for e in ledger.registry.entries() if e.capability == CAPABILITY]
        put_record(
            ledger.store,
            ledger.clock,
            kind=DirectoryKind.EXECUTOR_BUILD,
            record_id=executor_build_record_id(CAPABILITY, old),
            values={"delivery_mode": "provider_idempotency", "available": True},
        )
        streams = []
        for n in range(7):
            spec = base_spec(capability=CAPABILITY, executor_build=old, content={"n": n})
            proposal_id = propose(ledger.context, actor_id="alice", spec_data=spec).proposal_id
            token = present(
                ledger.context,
                proposal_id=proposal_id,
                version=1,
                identity_binding_id="ib1",
                channel_binding_id="cb1",
                conversation_key="conv-1",
            ).token
            streams.append(proposal_id)
            if n < 2:
                streams.append(
                    approve(ledger.context, token=token, provenance=world.who).attempt_id
                )
        ledger.projector.project_streams(streams)
    finally:
        ledger.close()
    env = {
        "LEDGER_STORE": "sqlite",
        "LEDGER_SQLITE_PATH": db,
        TOKEN_VARIABLE: f"Bearer {provider.token}",
    }
    return {"old": old, "env": env, "dir": tmp_path, "url": provider.url}


def check(pending: dict[str, Any], text: str, *args: str) -> Any:
    path = pending["dir"] / "next.toml"
    path.write_text(text)
    return invoke(["executors", "check", *args], LEDGER_EXECUTORS_FILE=str(path), **pending["env"])


def test_a_file_that_drops_a_build_with_pending_work_is_refused(pending: dict[str, Any]) -> None:
    result = check(pending, entry(pending["url"], 15))

    assert result.exit_code == 1
    assert (
        "2 queued attempts and 5 open presentations are bound to "
        f"tasks.create {pending['old']}, which this file drops"
    ) in result.stderr
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "error: switching to these executors drops builds that pending work is bound to"
        )
    )
    assert "Traceback" not in result.stderr

    allowed = check(pending, entry(pending["url"], 15), "--allow-dropping")
    assert allowed.exit_code == 0, allowed.stderr
    assert "which this file drops" in allowed.stderr and "ok: 4 executors" in allowed.stderr


def test_keeping_the_old_entry_draining_drops_nothing_and_says_what_to_register(
    pending: dict[str, Any],
) -> None:
    rolled = entry(pending["url"], 10, draining=True) + "\n" + entry(pending["url"], 15)
    result = check(pending, rolled)

    assert result.exit_code == 0, result.stderr
    old = pending["old"]
    assert (
        f"tasks.create {old} draining: available in the directory; "
        "2 queued attempts and 5 open presentations"
    ) in result.stderr
    (new_line,) = [
        line
        for line in result.stderr.splitlines()
        if line.startswith("tasks.create ") and " current: " in line
    ]
    new = new_line.split()[1]
    assert new != old
    assert "not in the directory: register it before a proposal names it " in new_line
    assert f"(PUT /directory/executor-builds/tasks.create/{new})" in new_line
    listed = [line.split() for line in result.stdout.splitlines() if line.startswith("tasks.")]
    assert [(fields[1], fields[4]) for fields in listed] == sorted(
        [(old, "draining"), (new, "current")]
    )


def test_file_only_and_a_store_not_made_yet_read_nothing(
    pending: dict[str, Any], tmp_path: Path
) -> None:
    only = check(pending, entry(pending["url"], 15), "--file-only")
    assert only.exit_code == 0 and "which this file drops" not in only.stderr
    missing = {**pending, "env": {**pending["env"], "LEDGER_SQLITE_PATH": str(tmp_path / "no.db")}}
    fresh = check(missing, entry(pending["url"], 15))
    assert fresh.exit_code == 0
    assert "no store at" in fresh.stderr and not (tmp_path / "no.db").exists()
