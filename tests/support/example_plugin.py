"""pytest plugin: the example executor plugin (examples/ledger-example-plugin), pip-installed
into a session directory that tests put on ``sys.path`` / ``PYTHONPATH``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ministack import REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "ledger-example-plugin"


def install_example(target: Path) -> Path:
    """``pip install`` the example plugin into ``target`` (offline, no build isolation)."""
    source = target.parent / "example-source"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            "--target",
            str(target),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return target


@pytest.fixture(scope="session")
def example_plugin_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the installed example plugin (package + dist-info)."""
    return install_example(tmp_path_factory.mktemp("example-plugin") / "site")
