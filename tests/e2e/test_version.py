"""``ledger --version`` and the OpenAPI document name the installed version, whose
one source is ``version`` in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import api.version
from tests.support.cli import invoke

REPO_ROOT = Path(__file__).resolve().parents[2]


def declared_version() -> str:
    with (REPO_ROOT / "pyproject.toml").open("rb") as file:
        return str(tomllib.load(file)["project"]["version"])


def test_the_installed_metadata_is_the_declared_version() -> None:
    assert version("execution-ledger") == declared_version()


def test_ledger_version_prints_the_installed_version_and_exits_zero() -> None:
    result = invoke(["--version"])

    assert result.exit_code == 0
    assert result.stdout == f"ledger {declared_version()}\n"


def test_the_console_script_prints_it_too() -> None:
    script = Path(sys.executable).parent / "ledger"
    if not script.exists():
        pytest.skip("the ledger console script is not installed beside this interpreter")
    result = subprocess.run(
        [str(script), "--version"], capture_output=True, text=True, timeout=60, check=False
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"ledger {declared_version()}"


def test_the_openapi_document_carries_the_same_version(client: TestClient) -> None:
    info = client.get("/openapi.json").json()["info"]

    assert info["version"] == declared_version()


def test_sources_that_were_never_installed_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(_: str) -> str:
        raise api.version.PackageNotFoundError("execution-ledger")

    api.version.package_version.cache_clear()
    monkeypatch.setattr(api.version, "version", missing)
    try:
        assert api.version.package_version() == "0+unknown"
    finally:
        api.version.package_version.cache_clear()
