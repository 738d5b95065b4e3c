"""The store is chosen once, in bootstrap: no module asks which recorder it has."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECORDER_TYPES = {"MemoryLedgerRecorder", "SQLiteLedgerRecorder", "DynamoDBLedgerRecorder",
                  "ApplicationRecorder", "POPOApplicationRecorder", "SQLiteApplicationRecorder"}


def isinstance_checks_on_recorders(path: Path, root: Path = ROOT) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "isinstance" and len(node.args) == 2):
            names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
            names |= {n.attr for n in ast.walk(node.args[1]) if isinstance(n, ast.Attribute)}
            if names & RECORDER_TYPES:
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_module_of_adapters_or_api_checks_the_recorder_type() -> None:
    sources = sorted([*ROOT.joinpath("adapters").rglob("*.py"),
                      *ROOT.joinpath("api").rglob("*.py")])
    assert sources
    found = [hit for path in sources for hit in isinstance_checks_on_recorders(path)]
    assert found == []


def test_the_check_finds_what_it_looks_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("def f(r):\n    return isinstance(r, SQLiteLedgerRecorder)\n")
    assert isinstance_checks_on_recorders(sample, tmp_path) == ["sample.py:2"]
