"""The cheapest benchmarks run with --quick and print their tables, so they cannot
rot. Nothing here looks at a timing: the figures of a smoke run mean nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.bench_runs import BENCH, bench_env, run_bench

pytestmark = pytest.mark.slow


@pytest.mark.dynamodb
def test_ministack_benchmarks_run_and_print_their_tables(tmp_path: Path) -> None:
    env = bench_env(tmp_path)
    runs = {  # side by side: each mostly waits for its own emulator
        script: subprocess.Popen(
            [sys.executable, str(BENCH / script), "--quick", *extra],
            cwd=BENCH,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for script, extra in (
            ("bench_protocol.py", ()),
            ("bench_rebuild.py", ()),
            ("bench_digest.py", ()),
            ("bench_quorum.py", ()),
            ("bench_throughput.py", ("--ministack-only",)),
        )
    }
    outputs = {}
    for script, process in runs.items():
        try:
            out, err = process.communicate(timeout=240)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode == 0, out[-2000:] + err[-2000:]
        outputs[script] = out

    out = outputs["bench_protocol.py"]
    assert "Happy path of one attempt" in out and "| happy | approval |" in out
    assert "Worker reads" in out and "Recovery paths" in out
    assert "On-demand cost per million attempts" in out
    assert "cold approval requests" in out and "BatchGetItem 2" in out
    assert (tmp_path / "bench_protocol.quick.md").read_text().startswith("# bench_protocol")
    out = outputs["bench_throughput.py"]
    assert "Cold approvals per second" in out and "| before: a Query per directory" in out
    assert "| 1 x 8 |" in out and "| 2 x 4 |" in out  # processes x threads, each forked
    assert "where the client's CPU goes" in out and "the ledger's own code" in out
    assert (tmp_path / "bench_throughput.quick.md").exists()
    out = outputs["bench_rebuild.py"]
    assert "SQLite on the repository's disk" in out and "DynamoDB (ministack)" in out
    assert "after: batched rebuild" in out and "before: per-row rebuild" in out
    assert (tmp_path / "bench_rebuild.quick.md").exists()
    out = outputs["bench_digest.py"]
    assert "Digest over 2,000 streams" in out and "head index on" in out
    assert (tmp_path / "bench_digest.quick.md").exists()
    out = outputs["bench_quorum.py"]
    assert (
        "| two-person | vote 1 | vote_recorded |" in out and "| vote 2 | execution_pending |" in out
    )


def test_waiter_benchmark_runs_and_prints_its_tables(tmp_path: Path) -> None:
    out = run_bench("bench_waiters.py", tmp_path)
    assert "long polls waiting at once" in out
    assert "From the view change to the waiter's answer" in out
    assert (tmp_path / "bench_waiters.quick.md").exists()


def test_sqlite_callers_benchmark_prints_both_paths_side_by_side(tmp_path: Path) -> None:
    out = run_bench("bench_throughput.py", tmp_path, "--sqlite-only", timeout=300)
    assert "SQLite: lifecycles per second, 1 vs 4 callers" in out
    assert "| disk | before |" in out and "| RAM | after |" in out
    assert "SQLite: statements per lifecycle" in out
    assert "| RAM | one process each (forked) |" in out
    assert "What bounds the threads" in (tmp_path / "bench_throughput.quick.md").read_text()
    assert (tmp_path / "bench_throughput.quick.md").exists()


def test_durability_benchmark_counts_at_most_one_fsync_per_answered_commit(
    tmp_path: Path,
) -> None:
    """Not a timing: the number of fsync/fdatasync calls per lifecycle that
    strace counts (when installed) stays within the durable commits."""
    out = run_bench("bench_durability.py", tmp_path, timeout=300)
    rows = [line.split("|")[1:-1] for line in out.splitlines() if "durable commits |" in line]
    assert len(rows) == 2  # disk and RAM
    for cells in rows:
        commit_fsyncs, durable = cells[5].strip(), float(cells[6])
        assert durable <= 5
        if commit_fsyncs != "-":  # strace is installed
            assert float(commit_fsyncs) <= 5


def test_projector_benchmark_prints_both_paths_side_by_side(tmp_path: Path) -> None:
    out = run_bench("bench_projector.py", tmp_path)
    assert "SQLite on the repository's disk" in out
    assert "| before: through the aggregate |" in out
    assert "| after: the status fold of the events' data |" in out
    assert (tmp_path / "bench_projector.quick.md").exists()


def test_store_growth_benchmark_prints_its_table() -> None:
    out = run_bench("bench_store_growth.py", None, timeout=240)
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if "|" in line}
    # the housekeeping sweeps every expired lookup; events are never deleted
    assert rows["ledger_lookups"].split("|")[4].strip() == "0"
    assert rows["stored_events"].split("|")[6].strip() == "1.00"
    assert "file (after VACUUM)" in rows


def test_policy_benchmark_prints_both_lifecycles_side_by_side(tmp_path: Path) -> None:
    out = run_bench("bench_policy.py", tmp_path)
    assert "no policy set vs the three worked examples" in out
    assert "| RAM file system /dev/shm (no sync cost) |" in out
    assert (tmp_path / "bench_policy.quick.md").exists()


def test_http_callers_benchmark_prints_both_paths_side_by_side(tmp_path: Path) -> None:
    out = run_bench("bench_http_callers.py", tmp_path)
    assert "lifecycles per second, 1 vs 8 HTTP clients" in out
    assert "| before | 8 |" in out and "| after | 1 |" in out
    assert "8 clients / 1 client (after)" in out
    assert (tmp_path / "bench_http_callers.quick.md").exists()
