"""Running a benchmark script as the smoke tests do: a subprocess in bench/,
with --quick, no LEDGER_ setting of the outer environment, results in a
folder of the test's own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def bench_env(results: Path | None) -> dict[str, str]:
    """The environment of a benchmark run: no LEDGER_ setting of the outer one,
    its results written under ``results`` (when given), never into bench/results."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    if results is not None:
        env["LEDGER_BENCH_RESULTS"] = str(results)
    return env


def run_bench(script: str, results: Path | None, *args: str, timeout: float = 180) -> str:
    """Run ``bench/<script> --quick *args``; its standard output (it must exit 0)."""
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--quick", *args],
        cwd=BENCH,
        env=bench_env(results),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout
