"""A failed install leaves no half-made virtual environment behind.

The Makefile's install recipe runs in a scratch copy whose install cannot
succeed (no package index: pip can fetch neither the build backend nor a
dependency). Whatever the stage, the environment is removed, no stamp is
written, and one line says so, so the next ``make`` starts afresh instead of
trusting half an install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # a real venv and a real pip run: a few seconds each

UNREACHABLE = """\
[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "install-check"
version = "0.0.0"
dependencies = ["execution-ledger-dependency-that-cannot-be-fetched==1.0"]
"""


def failing_copy(tmp_path: Path) -> Path:
    work = tmp_path / "repo"
    work.mkdir()
    shutil.copy(REPO_ROOT / "Makefile", work / "Makefile")
    (work / "pyproject.toml").write_text(UNREACHABLE)
    return work


def make(work: Path, target: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PIP_NO_INDEX": "1",  # nothing can be fetched: the install must fail
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    env.pop("MAKEFLAGS", None)
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        ["make", "--no-print-directory", target, f"PYTHON={sys.executable}"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_a_failed_first_install_removes_the_venv_and_writes_no_stamp(tmp_path: Path) -> None:
    work = failing_copy(tmp_path)
    # A leftover of an interrupted older install: a venv without a stamp.
    (work / ".venv").mkdir()
    (work / ".venv" / "leftover").write_text("half an install")

    result = make(work, "install-run")

    assert result.returncode != 0
    assert not (work / ".venv").exists(), result.stderr
    assert ".venv was removed, so the next make starts afresh" in result.stderr


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_a_failed_dev_install_over_the_runtime_one_removes_the_venv(tmp_path: Path) -> None:
    work = failing_copy(tmp_path)
    # What `make run` left: a stamped runtime environment (here only its stamp).
    (work / ".venv").mkdir()
    (work / ".venv" / ".installed").touch()
    os.utime(work / "pyproject.toml", (0, 0))  # the stamp is newer: only the dev stage runs

    result = make(work, "install")

    assert result.returncode != 0
    assert "the dev and aws extras" in result.stdout
    assert not (work / ".venv").exists(), result.stderr
    assert not list(work.glob(".venv*")), "no stamp or partial environment is left"
    assert ".venv was removed, so the next make starts afresh" in result.stderr
