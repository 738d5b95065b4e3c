"""bench_peer runs with --quick and prints its table, so it cannot rot; without
the peer's environment it says in one line how to build it. Nothing here looks
at a timing: the figures of a smoke run mean nothing.

``make test`` does not build the peer's environment (``.venv-dbos``: a
download of DBOS Transact and its dependencies, about a minute on a busy
machine); ``make bench`` and ``make install-peer`` do, and the smoke run is
skipped until one of them has."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.bench_runs import BENCH, bench_env

ROOT = Path(__file__).resolve().parents[2]
PEER = ROOT / ".venv-dbos"


def _run(tmp_path: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH / "bench_peer.py"), "--quick", *args],
        cwd=BENCH,
        env=bench_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_missing_peer_environment_is_one_line_that_says_how_to_build_it(
    tmp_path: Path,
) -> None:
    done = _run(tmp_path, "--dbos-python", str(tmp_path / "no-such-python"), timeout=120)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert (
        done.stderr.strip()
        == f"bench_peer: --dbos-python {tmp_path}/no-such-python: no such interpreter"
    )
    assert not list(tmp_path.glob("*.md"))  # no results file


@pytest.mark.slow
@pytest.mark.skipif(
    not any(PEER.glob(".installed-*")),
    reason="the peer's environment .venv-dbos is not built: make install-peer (make bench does)",
)
def test_peer_benchmark_runs_and_prints_its_table(tmp_path: Path) -> None:
    done = _run(tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = done.stdout
    assert "| the ledger (full lifecycle) |" in out
    assert "| the library's Application (same saves and gets) |" in out
    for polling in ("10 ms", "1 ms", "1000 ms (its default)"):
        assert f", notification polling {polling} |" in out
    text = (tmp_path / "bench_peer.quick.md").read_text()
    assert text.startswith("# bench_peer") and "target >= 5x" in text
    assert not list((ROOT / "var").glob("bench-peer-*"))  # its files are removed
