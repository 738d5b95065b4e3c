"""The store is chosen once, in bootstrap: no module asks which recorder it has."""

from __future__ import annotations

import ast
import socket
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECORDER_TYPES = {
    "MemoryLedgerRecorder",
    "SQLiteLedgerRecorder",
    "DynamoDBLedgerRecorder",
    "ApplicationRecorder",
    "POPOApplicationRecorder",
    "SQLiteApplicationRecorder",
}


def isinstance_checks_on_recorders(path: Path, root: Path = ROOT) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "isinstance"
            and len(node.args) == 2
        ):
            names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
            names |= {n.attr for n in ast.walk(node.args[1]) if isinstance(n, ast.Attribute)}
            if names & RECORDER_TYPES:
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_module_of_adapters_or_api_checks_the_recorder_type() -> None:
    sources = sorted(
        [*ROOT.joinpath("adapters").rglob("*.py"), *ROOT.joinpath("api").rglob("*.py")]
    )
    assert sources
    found = [hit for path in sources for hit in isinstance_checks_on_recorders(path)]
    assert found == []


def test_the_check_finds_what_it_looks_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("def f(r):\n    return isinstance(r, SQLiteLedgerRecorder)\n")
    assert isinstance_checks_on_recorders(sample, tmp_path) == ["sample.py:2"]


def store_kind_branches(path: Path, root: Path = ROOT) -> list[str]:
    """Every reference to a ``StoreKind`` member (a choice made by store)."""
    return [
        f"{path.relative_to(root)}:{node.lineno}"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "StoreKind"
    ]


def test_no_module_of_api_branches_on_the_store_kind() -> None:
    sources = sorted(ROOT.joinpath("api").rglob("*.py"))
    assert [hit for path in sources for hit in store_kind_branches(path)] == []


def test_the_store_kind_check_finds_what_it_looks_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("def f(s):\n    return s.store is StoreKind.DYNAMODB\n")
    assert store_kind_branches(sample, tmp_path) == ["sample.py:2"]


def test_each_backend_names_its_store_for_the_start_up_line(tmp_path: Path) -> None:
    from adapters.memory.backend import MemoryBackend
    from adapters.sqlite.backend import SQLiteBackend

    path = str(tmp_path / "ledger.db")
    assert MemoryBackend().describe() == "memory (nothing is kept after exit)"
    assert SQLiteBackend.open(path).describe() == f"sqlite {path}"
    assert SQLiteBackend.open(path).reopen().describe() == f"sqlite {path}"


def test_the_embedded_backends_need_nothing_before_their_loops_start(tmp_path: Path) -> None:
    from adapters.bootstrap import preflight
    from adapters.settings import load_settings

    for store in ("memory", "sqlite"):
        preflight(load_settings(store=store, sqlite_path=str(tmp_path / "l.db")))
    assert not (tmp_path / "l.db").exists()  # nothing is opened by the check


def test_dynamodb_fails_before_anything_opens_when_the_streams_endpoint_is_unreachable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from adapters.backend import PreflightError
    from adapters.bootstrap import preflight
    from adapters.settings import load_settings

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    for name, value in {
        "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": closed,
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(PreflightError) as raised:
        preflight(load_settings(store="dynamodb"))
    message = str(raised.value)
    assert message.startswith(
        f"cannot reach the DynamoDB Streams endpoint {closed} (EndpointConnectionError)"
    )
    assert "AWS_ENDPOINT_URL_DYNAMODB_STREAMS" in message
    assert "\n" not in message
