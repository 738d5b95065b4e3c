"""bench_application runs with --quick and prints its tables, so it cannot rot.
Nothing here looks at a timing: the figures of a smoke run mean nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.bench_runs import run_bench

pytestmark = pytest.mark.slow


def test_application_benchmark_runs_and_prints_its_tables(tmp_path: Path) -> None:
    out = run_bench("bench_application.py", tmp_path, timeout=300)
    assert "the library's Application doing the same saves and gets" in out
    new_row = next(line for line in out.splitlines() if line.startswith("| new |"))
    assert new_row.endswith("| 0 |")  # no encoding left to the rfc8785 package
    assert (tmp_path / "bench_application.quick.md").read_text().startswith("# bench_application")
