"""Shared fixtures of the HTTP and CLI tests: a memory-store app with a fixed clock."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger, build_ledger
from adapters.settings import Settings, load_settings
from api.http.app import create_app
from api.http.auth import mint_token
from tests.e2e.helpers import FIXED_NOW, PROVENANCE, Headers
from tests.support.clocks import FixedClock


@pytest.fixture(autouse=True)
def _hermetic_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No LEDGER_* variable from the outer environment leaks into these tests."""
    for name in list(os.environ):
        if name.startswith("LEDGER_"):
            monkeypatch.delenv(name)


@pytest.fixture
def settings() -> Settings:
    return load_settings(store="memory", env="test")


@pytest.fixture
def ledger(settings: Settings) -> Iterator[Ledger]:
    wired = build_ledger(settings, clock=FixedClock(FIXED_NOW))
    yield wired
    wired.close()


@pytest.fixture
def client(settings: Settings, ledger: Ledger) -> Iterator[TestClient]:
    with TestClient(create_app(settings, ledger=ledger)) as test_client:
        yield test_client


@pytest.fixture
def bearer(settings: Settings) -> Callable[..., Headers]:
    """``bearer("admin")`` -> an Authorization header the app accepts."""

    def make(role: str = "admin", subject: str = "tester", **kwargs: Any) -> Headers:
        if role == "channel":
            kwargs.setdefault("provenance", PROVENANCE)
        token = mint_token(settings, subject=subject, role=role, **kwargs)
        return {"Authorization": f"Bearer {token}"}

    return make


@pytest.fixture
def admin(bearer: Callable[..., Headers]) -> Headers:
    return bearer("admin")
