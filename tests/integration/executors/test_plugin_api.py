"""The plugin API: entry points, one registry, one-line start-up errors, never half a set."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from adapters.bootstrap import build_ledger
from adapters.executors.loader import ENTRY_POINT_GROUP, ExecutorConfigError, load_executors
from adapters.settings import load_settings
from tests.support.ministack import REPO_ROOT

SAMPLES = "tests.support.plugin_samples"


def point(name: str, attr: str) -> EntryPoint:
    return EntryPoint(name=name, value=f"{SAMPLES}:{attr}", group=ENTRY_POINT_GROUP)


def settings(**values: object):  # type: ignore[no-untyped-def]
    return load_settings(store="memory", **values)


def test_plugin_executors_and_reconcilers_are_registered_with_their_kind() -> None:
    loaded = load_executors(settings(fake_executors=False), plugins=[point("samples", "good")])
    entries = {e.capability: e for e in loaded.registry.entries()}
    assert set(entries) == {"sample.write", "sample.lookup"}
    assert entries["sample.write"].kind == "samples"
    lookup = entries["sample.lookup"]
    assert loaded.registry.reconciler("sample.lookup", lookup.build_digest) is not None
    assert loaded.registry.reconciler("sample.write", entries["sample.write"].build_digest) is None


@pytest.mark.parametrize(
    ("attr", "expected"),
    [
        (
            "raising",
            "executor plugin 'bad' (tests.support.plugin_samples:raising) failed: "
            "RuntimeError: cannot reach the plugin's configuration",
        ),
        (
            "leaking",
            "executor plugin 'bad' (tests.support.plugin_samples:leaking) failed: RuntimeError",
        ),
        ("bad_digest", "sample.write: build_digest must be sha256:<64 hex>"),
        ("bad_mode", "sample.write: delivery_mode must be a DeliveryMode"),
        (
            "lookup_without_reconciler",
            "sample.lookup: correlation_lookup needs a read-only reconciler",
        ),
        ("not_iterable", "failed: TypeError"),
        ("not_a_factory", "failed: TypeError"),
        ("missing_attribute", "failed: AttributeError"),
    ],
)
def test_a_broken_plugin_stops_start_up_with_one_line_naming_it(attr: str, expected: str) -> None:
    with pytest.raises(ExecutorConfigError) as caught:
        load_executors(settings(), plugins=[point("good", "good"), point("bad", attr)])
    message = str(caught.value)
    assert expected in message
    assert "\n" not in message
    assert "sk_live" not in message
    assert "'bad'" in message


def test_a_duplicate_build_stops_start_up_and_nothing_is_half_registered() -> None:
    with pytest.raises(ExecutorConfigError) as caught:
        load_executors(
            settings(), plugins=[point("first", "good"), point("again", "duplicate_of_good")]
        )
    assert "executor plugin 'again'" in str(caught.value)
    assert "already registered" in str(caught.value)


def test_two_identical_file_entries_are_one_build_registered_twice(tmp_path: Path) -> None:
    """Marked draining or not, the same configuration is the same build: the digest
    does not cover the mark."""
    from tests.support.http_executors import load_http

    entry = (
        '[[http]]\ncapability = "tasks.create"\ndelivery_mode = "provider_idempotency"\n'
        'url = "http://127.0.0.1:9/v1/{destination}"\n'
    )
    with pytest.raises(ExecutorConfigError) as caught:
        load_http(tmp_path, entry + "\n" + entry + "draining = true\n", "t")
    assert str(caught.value).startswith(
        "LEDGER_EXECUTORS_FILE executors.toml: [[http]] #2 (tasks.create) registers "
        "tasks.create sha256:"
    )
    assert str(caught.value).endswith("which is already registered")


def test_build_ledger_fails_before_touching_the_store_when_a_plugin_is_broken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "executors.toml"
    path.write_text('[[http]]\ncapability = "tasks.create"\n')
    db = tmp_path / "ledger.db"
    with pytest.raises(ExecutorConfigError, match=r"delivery_mode: Field required"):
        build_ledger(load_settings(store="sqlite", sqlite_path=str(db), executors_file=str(path)))
    assert not db.exists()


def test_the_installed_example_plugin_is_found_through_its_entry_point(
    example_plugin_path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.syspath_prepend(str(example_plugin_path))
    monkeypatch.setenv("LEDGER_EXAMPLE_NOTES_FILE", str(tmp_path / "notes.jsonl"))
    loaded = load_executors(settings(fake_executors=False))
    entries = [e for e in loaded.registry.entries() if e.kind == "example-notes"]
    assert [(e.capability, e.delivery_mode.value) for e in entries] == [
        ("notes.append", "provider_idempotency")
    ]


def _digests_in_a_new_process(extra_path: Path, env: dict[str, str]) -> str:
    code = (
        "from adapters.executors.loader import load_executors;"
        "from adapters.settings import load_settings;"
        "r = load_executors(load_settings(store='memory')).registry;"
        "print(sorted((e.capability, e.build_digest) for e in r.entries()))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": f"{extra_path}:{REPO_ROOT}", **env},
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


@pytest.mark.slow
def test_digests_are_the_same_in_every_process_and_change_with_the_configuration(
    example_plugin_path: Path, tmp_path: Path
) -> None:
    from tests.support.http_executors import executors_toml

    path = tmp_path / "executors.toml"
    path.write_text(executors_toml("http://127.0.0.1:9"))
    env = {
        "LEDGER_EXECUTORS_FILE": str(path),
        "TASKS_TOKEN": "Bearer one",
        "LEDGER_EXAMPLE_NOTES_FILE": str(tmp_path / "a.jsonl"),
    }
    first = _digests_in_a_new_process(example_plugin_path, env)
    # another secret value and another notes path: the same builds
    second = _digests_in_a_new_process(
        example_plugin_path,
        {**env, "TASKS_TOKEN": "Bearer two", "LEDGER_EXAMPLE_NOTES_FILE": str(tmp_path / "b")},
    )
    assert first == second
    assert "notes.append" in first and "tasks.create" in first
    # one changed key: a new build for that entry only
    path.write_text(executors_toml("http://127.0.0.1:9", timeout=6))
    third = _digests_in_a_new_process(example_plugin_path, env)
    assert third != first
    notes = [line for line in first.split("), (") if "notes.append" in line]
    assert notes and notes[0] in third


def test_the_example_plugin_carries_an_approved_attempt_to_succeeded_once(
    example_plugin_path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import json
    from datetime import UTC, datetime

    from adapters.memory.recorder import MemoryLedgerRecorder
    from adapters.store import LedgerStore
    from domain.directory import DirectoryKind, executor_build_record_id
    from domain.errors import InvalidSpec
    from domain.services.approval import approve
    from domain.services.execution import CrashPoint, SimulatedCrash
    from tests.support.clocks import FixedClock
    from tests.support.worlds.execution import CrashAt, ExecutionWorld

    monkeypatch.syspath_prepend(str(example_plugin_path))
    notes = tmp_path / "notes.jsonl"
    monkeypatch.setenv("LEDGER_EXAMPLE_NOTES_FILE", str(notes))
    loaded = load_executors(settings(fake_executors=False))
    entry = next(e for e in loaded.registry.entries() if e.kind == "example-notes")
    # The plugin compares the deadline with the real time: the world's clock starts now.
    world = ExecutionWorld(
        LedgerStore(MemoryLedgerRecorder()),
        registry=loaded.registry,
        clock=FixedClock(datetime.now(UTC).replace(microsecond=0)),
    )
    world.put(
        DirectoryKind.EXECUTOR_BUILD,
        executor_build_record_id(entry.capability, entry.build_digest),
        delivery_mode=entry.delivery_mode.value,
        available=True,
    )
    build = {
        "capability": entry.capability,
        "executor_build": entry.build_digest,
        "schema_digest": entry.schema_digest,
    }
    # the plugin's content schema: a note without text never reaches execute
    with pytest.raises(InvalidSpec) as refused:
        world.propose(**build, content={"txt": "Call the plumber"})
    assert [p.pointer for p in refused.value.problems] == ["/spec/content/text"]
    proposal = world.propose(**build, content={"text": "Call the plumber"})
    attempt_id = approve(
        world.ctx, token=world.present(proposal).token, provenance=world.who
    ).attempt_id
    # crash after the response: recovery retries with the same key, the plugin dedups
    with pytest.raises(SimulatedCrash):
        world.worker(CrashAt(CrashPoint.AFTER_RESPONSE)).process(attempt_id)
    world.recover_after_lease()
    attempt = world.attempt(attempt_id)
    assert attempt.status.value == "succeeded"
    assert attempt.result is not None and attempt.result["receipt"]["note_number"] == 1
    rows = [json.loads(line) for line in notes.read_text().splitlines()]
    assert [row["text"] for row in rows] == ["Call the plumber"]
