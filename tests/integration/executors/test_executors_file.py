"""The executors file: every mistake is one line at start-up naming the entry and key,
never a secret value; digests follow the configuration, never a secret's value."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.executors.loader import ExecutorConfigError
from tests.support.http_executors import load_http

SECRET = "Bearer sk_live_canary_file_secret_value"
GOOD = {
    "capability": '"tasks.create"',
    "delivery_mode": '"provider_idempotency"',
    "url": '"https://tasks.example/v1/{destination}"',
    "headers": '{ Authorization = "env:TASKS_TOKEN" }',
    "receipt": '["/id", "/status"]',
}


def entry(**changes: str | None) -> str:
    values = {**GOOD, **changes}
    return "[[http]]\n" + "".join(f"{k} = {v}\n" for k, v in values.items() if v is not None)


def load(tmp_path: Path, text: str, environ: dict[str, str] | None = None, **settings: str):
    return load_http(
        tmp_path,
        text,
        "unused",
        environ={"TASKS_TOKEN": SECRET} if environ is None else environ,
        **settings,
    )


def digest_of(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> str:
    loaded = load(tmp_path, text, environ)
    try:
        return loaded.registry.entries()[0].build_digest
    finally:
        loaded.registry.close()


BAD = [
    ("unknown key", entry(retries="3"), "[[http]] #1 (tasks.create): retries: unknown key"),
    (
        "missing env variable",
        entry(headers='{ Authorization = "env:NOT_SET_ANYWHERE" }'),
        "headers.Authorization: environment variable NOT_SET_ANYWHERE is not set",
    ),
    (
        "url without scheme",
        entry(url='"tasks.example/v1/{destination}"'),
        "url: needs an http:// or https:// scheme",
    ),
    (
        "placeholder in the host",
        entry(url='"https://{destination}.example/v1"'),
        "url: needs a fixed host",
    ),
    (
        "credentials in the url",
        entry(url='"https://u:p@tasks.example/v1"'),
        "url: credentials in the URL are not allowed",
    ),
    (
        "unknown placeholder",
        entry(url='"https://tasks.example/v1/{content}"'),
        "url: unknown placeholder {content}",
    ),
    (
        "a literal secret header",
        entry(headers='{ Authorization = "Bearer abc" }'),
        "headers.Authorization: secret values must come from the environment",
    ),
    (
        "a header the executor sets",
        entry(headers='{ Host = "x" }'),
        "headers.Host: this header is set by the executor",
    ),
    (
        "a secret-shaped receipt field",
        entry(receipt='["/access_token"]'),
        "receipt pointer '/access_token' names a secret-shaped field",
    ),
    (
        "a receipt pointer that is not one",
        entry(receipt='["id"]'),
        "receipt pointer 'id' must start with '/'",
    ),
    (
        "lookup missing for correlation",
        entry(delivery_mode='"correlation_lookup"'),
        "lookup_url: required for delivery_mode correlation_lookup",
    ),
    (
        "lookup for another mode",
        entry(lookup_url='"https://t.example/{idempotency_key}"'),
        "lookup_url: only for delivery_mode correlation_lookup",
    ),
    ("bad delivery mode", entry(delivery_mode='"twice"'), "delivery_mode: Input should be"),
    ("bad method", entry(method='"DELETE"'), "method: Input should be"),
    ("timeout out of bounds", entry(timeout_seconds="0"), "timeout_seconds: Input should be"),
    ("settle window out of bounds", entry(settle_seconds="7200"), "settle_seconds:"),
    ("not TOML", "[[http]\ncapability =", "not valid TOML"),
    ("unknown table", "[[ftp]]\nurl = 'x'\n", "unknown key 'ftp'"),
]


@pytest.mark.parametrize(("case", "text", "expected"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_executors_file_is_one_line_naming_the_problem(
    tmp_path: Path, case: str, text: str, expected: str
) -> None:
    with pytest.raises(ExecutorConfigError) as caught:
        load(tmp_path, text)
    message = str(caught.value)
    assert expected in message, message
    assert message.startswith("LEDGER_EXECUTORS_FILE executors.toml: ")
    assert "\n" not in message
    assert "sk_live" not in message


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    from adapters.executors.loader import load_executors
    from adapters.settings import load_settings

    with pytest.raises(
        ExecutorConfigError,
        match=r"^LEDGER_EXECUTORS_FILE nope.toml: cannot "
        r"read \(No such file or directory\)$",
    ):
        load_executors(
            load_settings(store="memory", executors_file=str(tmp_path / "nope.toml")), plugins=[]
        )


def test_production_needs_https_except_on_loopback_and_keeps_tls_verification(
    tmp_path: Path,
) -> None:
    prod = {"env": "production", "auth_hs256_secret": "x" * 40}
    with pytest.raises(ExecutorConfigError, match="production needs https://"):
        load(tmp_path, entry(url='"http://tasks.example/v1"'), **prod)
    with pytest.raises(ExecutorConfigError, match="tls_verify: LEDGER_ENV=production"):
        load(tmp_path, entry(tls_verify="false"), **prod)
    loaded = load(tmp_path, entry(url='"http://127.0.0.1:9/v1/{destination}"'), **prod)
    assert [e.kind for e in loaded.registry.entries()] == ["http"]
    loaded.registry.close()


def test_the_digest_ignores_secret_values_and_key_order_but_not_variable_names(
    tmp_path: Path,
) -> None:
    base = digest_of(tmp_path, entry())
    assert digest_of(tmp_path, entry(), {"TASKS_TOKEN": "Bearer another"}) == base
    reordered = "[[http]]\n" + "".join(f"{k} = {v}\n" for k, v in reversed(GOOD.items()))
    assert digest_of(tmp_path, reordered) == base
    renamed = entry(headers='{ Authorization = "env:OTHER_TOKEN" }')
    assert digest_of(tmp_path, renamed, {"OTHER_TOKEN": SECRET}) != base
    for change in (
        {"timeout_seconds": "11"},
        {"receipt": '["/id"]'},
        {"method": '"PUT"'},
        {"url": '"https://tasks.example/v2/{destination}"'},
        {"idempotency_header": '"X-Key"'},
        {"settle_seconds": "5"},
    ):
        assert digest_of(tmp_path, entry(**change)) != base, change


def test_the_settle_window_is_exposed_on_the_executor(tmp_path: Path) -> None:
    loaded = load(tmp_path, entry(settle_seconds="2.5"))
    entry_ = loaded.registry.entries()[0]
    executor = loaded.registry.get(entry_.capability, entry_.build_digest)
    assert executor is not None
    assert getattr(executor, "settle_seconds", 0.0) == 2.5
    loaded.registry.close()


LOOKUP = {
    "delivery_mode": '"correlation_lookup"',
    "lookup_url": '"https://tasks.example/v1/by-key/{idempotency_key}"',
}


@pytest.mark.parametrize(
    ("changes", "window"),
    [
        # not written: at least the timeout, at least the floor (30 s)
        ({**LOOKUP, "timeout_seconds": "2"}, 30.0),
        ({**LOOKUP, "timeout_seconds": "45"}, 45.0),
        # 0 only when written so
        ({**LOOKUP, "settle_seconds": "0"}, 0.0),
        ({**LOOKUP, "settle_seconds": "7"}, 7.0),
        # only a lookup's "not applied" waits for it
        ({"timeout_seconds": "45"}, 0.0),
    ],
)
def test_a_lookup_entry_without_a_settle_window_gets_a_safe_default(
    tmp_path: Path, changes: dict[str, str], window: float
) -> None:
    loaded = load(tmp_path, entry(**changes))
    entry_ = loaded.registry.entries()[0]
    executor = loaded.registry.get(entry_.capability, entry_.build_digest)
    assert executor is not None
    assert getattr(executor, "settle_seconds", None) == window
    loaded.registry.close()


@pytest.mark.parametrize(("setting", "window"), [(None, 30.0), (2.0, 2.0)])
def test_the_lookup_fake_takes_its_settle_window_from_the_settings(
    setting: float | None, window: float
) -> None:
    from adapters.executors.fake import FAKE_CAPABILITIES, fake_build_digest
    from adapters.executors.loader import load_executors
    from adapters.settings import Settings
    from domain.services.worker_policy import settle_seconds

    settings = Settings(store="memory", fake_executors=True, fake_settle_seconds=setting)
    loaded = load_executors(settings, plugins=())
    for capability, mode in FAKE_CAPABILITIES.items():
        executor = loaded.registry.get(capability, fake_build_digest(capability))
        assert executor is not None
        expected = window if mode.value == "correlation_lookup" else 0.0
        assert settle_seconds(executor, 2.0) == expected, capability
    loaded.registry.close()
