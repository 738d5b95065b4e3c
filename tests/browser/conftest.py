"""The fixtures of the console's browser tests: Debian's headless Chromium,
launched once for the package with a fresh context per test, and one real
``ledger serve`` per store with the states the tests open (tests.support.browser)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from adapters.bootstrap import Ledger, build_ledger
from adapters.settings import load_settings
from tests.support.browser import CHROMIUM, FLAGS, STORES, Served, serve, store_env


@pytest.fixture(scope="package", params=STORES)
def served(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Served]:
    with store_env(request.param, tmp_path_factory.mktemp("console"), request) as where:
        client = request.getfixturevalue("dynamodb_client") if request.param != "sqlite" else None
        yield from serve(request.param, tmp_path_factory, where, client)


@pytest.fixture(scope="package")
def ledger_of(request: pytest.FixtureRequest) -> Any:
    """A ledger on a served store, in this process: to read its audit events."""
    built: dict[str, Ledger] = {}

    def of(served: Served) -> Ledger:
        if served.store not in built:
            with pytest.MonkeyPatch.context() as patch:
                for name, value in served.where.items():
                    patch.setenv(name, value)
                client = (
                    request.getfixturevalue("dynamodb_client") if served.store != "sqlite" else None
                )
                built[served.store] = build_ledger(
                    load_settings(env="development"), dynamodb_client=client
                )
        return built[served.store]

    return of


@pytest.fixture(scope="package")
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=FLAGS
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    """A page of a fresh browser context: no cookie of another test."""
    context = chromium.new_context(viewport={"width": 1200, "height": 900})
    try:
        yield context.new_page()
    finally:
        context.close()
