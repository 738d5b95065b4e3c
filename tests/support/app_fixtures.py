"""Pytest plugin: a memory-store app with a fixed clock, for the HTTP and CLI tests.

``hermetic_env`` is not autouse here; tests/e2e turns it on for the whole folder,
other modules ask for it with ``pytest.mark.usefixtures("hermetic_env")``."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger, build_ledger
from adapters.settings import Settings, load_settings
from api.http.app import create_app
from api.http.auth import mint_token
from tests.support.clocks import FixedClock
from tests.support.http_helpers import DIRECTORY, FIXED_NOW, PROVENANCE, Headers, directory_puts


@pytest.fixture
def hermetic_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No LEDGER_* variable from the outer environment leaks into the test."""
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


_APPS: list[tuple[Settings, FastAPI]] = []
"""One app per distinct settings in this worker, given each test's own ledger."""

_PER_TEST_STATE = ("console_oidc", "console_oidc_starts")
"""What a request leaves on ``app.state`` that is the test's (a sign-in rate
limit, the OIDC client with its discovery), dropped before the next test."""


def app_for(settings: Settings, ledger: Ledger) -> FastAPI:
    """The app of ``settings`` serving ``ledger``.

    FastAPI builds an included router's route contexts (a pydantic adapter per
    parameter) on the first request that reaches it, about half a second of CPU
    for the larger routers; a fresh app per test paid it in nearly every HTTP
    test. The routes read the ledger, its metrics and the settings from
    ``app.state`` per request, so an app made once per distinct settings and
    given the test's ledger answers as a fresh one does (test_app_reuse.py)."""
    found = [app for made_with, app in _APPS if made_with == settings]
    app = found[0] if found else create_app(settings, ledger=ledger)
    if not found:
        _APPS.append((settings, app))
    app.state.ledger = ledger
    app.state.idempotency_in_flight = ledger.in_flight
    app.dependency_overrides.clear()
    for name in _PER_TEST_STATE:
        if hasattr(app.state, name):
            delattr(app.state, name)
    return app


@pytest.fixture
def client(settings: Settings, ledger: Ledger) -> Iterator[TestClient]:
    with TestClient(app_for(settings, ledger)) as test_client:
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


@pytest.fixture
def directory(client: TestClient, admin: Headers) -> None:
    for path, body in directory_puts():
        response = client.put(DIRECTORY + path, json=body, headers=admin)
        assert response.status_code == 200, response.text


@pytest.fixture
def browser(settings: Settings, ledger: Ledger) -> Iterator[TestClient]:
    """A client on a loopback base URL (the console's development cookies are not Secure)."""
    with TestClient(app_for(settings, ledger), base_url="http://127.0.0.1") as c:
        yield c
