"""bench_application runs with --quick and prints its tables, so it cannot rot.
Nothing here looks at a timing: the figures of a smoke run mean nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_application_benchmark_runs_and_prints_its_tables(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env["LEDGER_BENCH_RESULTS"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, str(BENCH / "bench_application.py"), "--quick"],
        cwd=BENCH,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "the library's Application doing the same saves and gets" in done.stdout
    new_row = next(line for line in done.stdout.splitlines() if line.startswith("| new |"))
    assert new_row.endswith("| 0 |")  # no encoding left to the rfc8785 package
    assert (tmp_path / "bench_application.quick.md").read_text().startswith("# bench_application")
