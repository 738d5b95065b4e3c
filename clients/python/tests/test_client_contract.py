"""The client stays in step with the server: every schema it mirrors has the
server's field names, every error code the server can answer has its class, and
the package imports and installs without the server."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest

import ledger_client
from adapters.settings import load_settings
from api.http.app import create_app
from api.http.errors import HTTP_ERRORS, INTERNAL_ERROR, STATUS_BY_CODE
from ledger_client import answers, requests
from ledger_client._base import Model
from ledger_client.errors import ERRORS_BY_CODE, LedgerClientError, error_from_answer

CLIENT = Path(__file__).resolve().parents[1]
MIRRORED = [
    value
    for module in (answers, requests)
    for value in vars(module).values()
    if isinstance(value, type) and issubclass(value, Model) and value is not Model
]


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    document: dict[str, Any] = create_app(load_settings(store="memory", env="test")).openapi()
    return document


def field_names(cls: type[Model]) -> set[str]:
    import dataclasses

    return {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]


@pytest.mark.parametrize("cls", MIRRORED, ids=lambda cls: cls.SCHEMA)
def test_each_mirrored_schema_has_the_servers_field_names(
    cls: type[Model], openapi: dict[str, Any]
) -> None:
    schemas = openapi["components"]["schemas"]
    assert cls.SCHEMA in schemas, f"the server has no schema {cls.SCHEMA}"
    server = schemas[cls.SCHEMA]
    assert field_names(cls) == set(server["properties"]), cls.SCHEMA
    required = {f for f in field_names(cls) if _required(cls, f)}
    assert required == set(server.get("required", [])), cls.SCHEMA


def _required(cls: type[Model], name: str) -> bool:
    import dataclasses

    (found,) = [f for f in dataclasses.fields(cls) if f.name == name]  # type: ignore[arg-type]
    return found.default is dataclasses.MISSING and found.default_factory is dataclasses.MISSING


NOT_IN_THE_CLIENT = ("/webhook-deliveries", "/events", "/audit/digest")
"""Admin routes the client leaves to ``ledger`` and the console."""


def test_every_request_and_answer_of_the_routes_the_client_calls_is_mirrored(
    openapi: dict[str, Any],
) -> None:
    used: set[str] = set()
    for path, operations in openapi["paths"].items():
        if not path.startswith("/api/conversational/") or any(
            part in path for part in NOT_IN_THE_CLIENT
        ):
            continue
        for operation in operations.values():
            text = json.dumps([operation.get("requestBody"), operation.get("responses")])
            used |= {ref.split('"')[0] for ref in text.split('"$ref": "#/components/schemas/')[1:]}
    mirrored = {cls.SCHEMA for cls in MIRRORED}
    assert used - {"ErrorBody"} - mirrored == set()


def test_every_server_error_code_has_its_own_class() -> None:
    server_codes = set(STATUS_BY_CODE) | {code for code, _ in HTTP_ERRORS.values()}
    server_codes |= {INTERNAL_ERROR[0]}
    missing = server_codes - set(ERRORS_BY_CODE)
    assert missing == set(), f"no client class for {sorted(missing)}"
    for code in server_codes:
        status = STATUS_BY_CODE.get(code, 400)
        error = error_from_answer(status, {"error": code, "detail": "why"})
        assert type(error) is ERRORS_BY_CODE[code] and error.code == code
        assert (error.status, error.detail) == (status, "why")
        assert isinstance(error, LedgerClientError)


def test_an_unknown_code_or_a_foreign_body_still_raises_a_ledger_client_error() -> None:
    error = error_from_answer(418, {"error": "added_later", "detail": "x"})
    assert type(error) is LedgerClientError and error.code == "added_later"
    assert error_from_answer(502, "<html>").code == "internal_error"
    assert error_from_answer(429, None).code == "too_many_requests"


def test_the_input_refusals_share_the_servers_hierarchy() -> None:
    from domain import errors as server

    for code, cls in ERRORS_BY_CODE.items():
        twin = next(
            (
                c
                for c in vars(server).values()
                if isinstance(c, type) and getattr(c, "code", None) == code
            ),
            None,
        )
        if twin is None or twin is server.ExecutorKeyReused:
            continue
        assert issubclass(cls, ERRORS_BY_CODE["invalid_input"]) == issubclass(
            twin, server.InvalidInput
        ), code


BLOCKER = """
import importlib, importlib.abc, pkgutil, sys
SERVER = {"domain", "projections", "adapters", "api", "fastapi", "pydantic", "starlette"}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in SERVER:
            raise ImportError("the client imported " + name)
sys.meta_path.insert(0, Block())
import ledger_client
for info in pkgutil.walk_packages(ledger_client.__path__, "ledger_client."):
    importlib.import_module(info.name)
print(sorted(m for m in sys.modules if m.startswith("ledger_client")))
"""


def test_the_client_imports_nothing_of_the_server() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BLOCKER], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "ledger_client.webhooks" in done.stdout and "ledger_client.aio" in done.stdout


def test_the_distribution_depends_on_httpx_alone() -> None:
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    assert [d.split(">")[0].split("=")[0] for d in project["dependencies"]] == ["httpx"]
    assert project["name"] == "execution-ledger-client"
    assert project["version"] == ledger_client.__version__


@pytest.mark.slow
def test_the_wheel_holds_the_client_alone(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(CLIENT)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (wheel,) = tmp_path.glob("execution_ledger_client-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert {name.split("/")[0] for name in names} == {
        "ledger_client",
        f"execution_ledger_client-{ledger_client.__version__}.dist-info",
    }
    assert "ledger_client/py.typed" in names
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    assert len(requires) == 1 and requires[0].startswith("Requires-Dist: httpx")
