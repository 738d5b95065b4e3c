"""The HTTP tests' app, made once per distinct settings (tests.support.app_fixtures
``app_for``), answers each test from that test's ledger: what one ledger holds is
not seen through the next, the request metrics land in the serving ledger's
registry, and what a test left on the app (dependency overrides, a sign-in rate
limit) is gone before the next."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from adapters.bootstrap import build_ledger
from adapters.settings import Settings
from api.http.deps import get_ledger
from tests.support.app_fixtures import app_for
from tests.support.clocks import FixedClock
from tests.support.http_helpers import DIRECTORY, FIXED_NOW, Headers


def _metric_total(registry_text: str, route: str) -> float:
    total = 0.0
    for line in registry_text.splitlines():
        if line.startswith("ledger_http_request_duration_seconds_count") and route in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_a_reused_app_serves_each_tests_own_ledger(
    settings: Settings, bearer: Callable[..., Headers]
) -> None:
    admin = bearer("admin")
    first = build_ledger(settings, clock=FixedClock(FIXED_NOW))
    second = build_ledger(settings, clock=FixedClock(FIXED_NOW))
    try:
        app = app_for(settings, first)
        with TestClient(app) as client:
            made = client.put(DIRECTORY + "/actors/alice", json={"enabled": True}, headers=admin)
            assert made.status_code == 200, made.text
            app.dependency_overrides[get_ledger] = lambda: first  # what a test may leave
        assert app_for(settings, second) is app  # the same app, made once
        assert app.dependency_overrides == {}
        with TestClient(app) as client:
            assert client.get(DIRECTORY + "/actors/alice", headers=admin).status_code == 404
            again = client.get(DIRECTORY + "/actors/alice", headers=admin)
            assert again.status_code == 404
        template = 'route="/api/conversational/directory/actors/{actor_id}"'
        assert _metric_total(first.metrics.render(), template) == 1
        assert _metric_total(second.metrics.render(), template) == 2
    finally:
        first.close()
        second.close()


def test_other_settings_get_an_app_of_their_own(settings: Settings) -> None:
    other = settings.model_copy(update={"auth_jwks_max_keys": 7})
    ledger = build_ledger(settings, clock=FixedClock(FIXED_NOW))
    try:
        assert app_for(settings, ledger) is not app_for(other, ledger)
        assert app_for(other, ledger).state.settings is other
    finally:
        ledger.close()
