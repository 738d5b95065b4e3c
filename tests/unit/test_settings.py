"""Settings: the signing secret never prints, and the dispatch limit is its own knob."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from adapters.runtime import worker_policy
from adapters.settings import DEVELOPMENT_SECRET, SettingsError, load_settings

SECRET = "s3cr3t-" + "x" * 40


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("LEDGER_"):
            monkeypatch.delenv(name)


def test_no_repr_str_or_dump_of_the_settings_shows_the_signing_secret() -> None:
    settings = load_settings(auth_hs256_secret=SECRET)
    shown = [
        repr(settings),
        str(settings),
        repr(settings.auth_hs256_secret),
        str(settings.auth_hs256_secret),
        settings.model_dump_json(),
        str(settings.model_dump()),
        f"{settings}",
        f"{settings!r}",
    ]
    assert all("s3cr3t" not in text for text in shown), shown
    assert settings.auth_hs256_secret.get_secret_value() == SECRET


def test_the_secret_from_the_environment_is_held_the_same_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LEDGER_AUTH_HS256_SECRET", SECRET)
    settings = load_settings()
    assert "s3cr3t" not in repr(settings)
    assert settings.auth_hs256_secret.get_secret_value() == SECRET
    assert not settings.uses_development_secret


def test_a_short_secret_is_refused_in_one_line_without_its_value() -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings(auth_hs256_secret="s3cr3t-short")
    message = str(caught.value)
    assert "LEDGER_AUTH_HS256_SECRET: must be at least 32 characters" in message
    assert "s3cr3t" not in message and "\n" not in message


def test_production_still_refuses_the_development_secret() -> None:
    with pytest.raises(SettingsError, match="refuses the built-in development secret"):
        load_settings(env="production", auth_hs256_secret=DEVELOPMENT_SECRET)
    assert load_settings(env="production", auth_hs256_secret=SECRET).env == "production"


def _policy(**settings: Any) -> Any:
    return worker_policy(SimpleNamespace(settings=load_settings(**settings)))  # type: ignore[arg-type]


def test_max_dispatches_is_its_own_setting_not_the_lease_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _policy().max_dispatches == 5
    monkeypatch.setenv("LEDGER_MAX_DISPATCHES", "2")
    monkeypatch.setenv("LEDGER_MAX_PREDISPATCH_LEASES", "7")
    policy = _policy()
    assert (policy.max_dispatches, policy.max_predispatch_leases) == (2, 7)


@pytest.mark.parametrize("value", ["0", "51", "many"])
def test_max_dispatches_out_of_bounds_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("LEDGER_MAX_DISPATCHES", value)
    with pytest.raises(SettingsError, match=r"^invalid settings: LEDGER_MAX_DISPATCHES: "):
        load_settings()


def test_every_setting_is_in_the_readmes_configuration_table() -> None:
    from pathlib import Path

    from adapters.settings import setting_variables

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    table = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    missing = [name for name in sorted(setting_variables()) if f"`{name}`" not in table]
    assert missing == [], f"add to the README's Configuration table: {missing}"


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("telegram-bot", "must be subject=channel pairs"),
        ("bot=Telegram", "invalid channel name"),
        ("bot=telegram,bot=slack", "is listed twice"),
    ],
)
def test_channel_services_are_checked_in_one_line(value: str, fragment: str) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings(auth_channel_services=value)
    assert "LEDGER_AUTH_CHANNEL_SERVICES" in str(caught.value) and fragment in str(caught.value)


def test_channel_services_and_claims_parse() -> None:
    settings = load_settings(
        auth_channel_services=" telegram-bot = telegram , slack-app=slack ",
        auth_role_claim="realm_access.roles",
    )
    assert settings.channel_services == {"telegram-bot": "telegram", "slack-app": "slack"}
    assert hash(settings) == hash(settings)  # settings stay hashable
    with pytest.raises(SettingsError, match="LEDGER_AUTH_ROLE_CLAIM"):
        load_settings(auth_role_claim="roles with spaces")


def test_waiting_for_build_threshold_defaults_to_ten_minutes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert load_settings().waiting_for_build_seconds == 600
    monkeypatch.setenv("LEDGER_WAITING_FOR_BUILD_SECONDS", "120")
    assert load_settings().waiting_for_build_seconds == 120


@pytest.mark.parametrize("value", ["9", "604801", "soon"])
def test_waiting_for_build_threshold_out_of_bounds_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("LEDGER_WAITING_FOR_BUILD_SECONDS", value)
    with pytest.raises(
        SettingsError, match=r"^invalid settings: LEDGER_WAITING_FOR_BUILD_SECONDS: "
    ):
        load_settings()


def test_the_runtime_bounds_have_defaults_and_reach_the_runtime(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from adapters.bootstrap import build_ledger
    from adapters.runtime import build_runtime

    settings = load_settings()
    assert (settings.worker_concurrency, settings.worker_concurrency_per_build) == (16, 4)
    assert settings.shutdown_grace_seconds == 25
    monkeypatch.setenv("LEDGER_WORKER_CONCURRENCY", "6")
    monkeypatch.setenv("LEDGER_WORKER_CONCURRENCY_PER_BUILD", "2")
    ledger = build_ledger(load_settings(store="memory"))
    try:
        pool = build_runtime(ledger).pool
        assert pool is not None and (pool.total, pool.per_build) == (6, 2)
        monkeypatch.setenv("LEDGER_EXECUTION_ENABLED", "false")
        assert build_runtime(build_ledger(load_settings(store="memory"))).pool is None
    finally:
        ledger.close()


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("LEDGER_WORKER_CONCURRENCY", "0"),
        ("LEDGER_WORKER_CONCURRENCY", "257"),
        ("LEDGER_WORKER_CONCURRENCY_PER_BUILD", "0"),
        ("LEDGER_SHUTDOWN_GRACE_SECONDS", "-1"),
        ("LEDGER_SHUTDOWN_GRACE_SECONDS", "901"),
        ("LEDGER_SHUTDOWN_GRACE_SECONDS", "soon"),
    ],
)
def test_a_runtime_bound_out_of_range_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError, match=rf"^invalid settings: {variable}: "):
        load_settings()


def test_a_per_build_bound_above_the_total_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_WORKER_CONCURRENCY", "4")
    monkeypatch.setenv("LEDGER_WORKER_CONCURRENCY_PER_BUILD", "8")
    with pytest.raises(SettingsError) as raised:
        load_settings()
    assert "LEDGER_WORKER_CONCURRENCY_PER_BUILD must be <= LEDGER_WORKER_CONCURRENCY" in str(
        raised.value
    )
    assert "\n" not in str(raised.value)
