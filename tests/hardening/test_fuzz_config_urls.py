"""Property-based fuzzing of every configured URL: whatever authority a file or
a setting writes (ports past 65535, port 0, letters from any script), a URL that
is accepted has a port the first request can use and a host in ASCII; one that
is refused is refused in one line naming the key. The class of the bug where a
port of 99999 or a look-alike host passed start-up and failed (or misled) later.
``LEDGER_FUZZ_EXAMPLES`` scales it."""

from __future__ import annotations

import base64
import os
from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from adapters.executors.http_config import URL_FIELDS, HttpConfigError, parse_template
from adapters.settings import SettingsError, load_settings
from adapters.webhooks.config import WebhookConfigError, check_webhook

EXAMPLES = int(os.environ.get("LEDGER_FUZZ_EXAMPLES", "6")) * 20
fuzz = hypothesis_settings(max_examples=EXAMPLES, deadline=None)
SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()

labels = st.text(
    alphabet=st.sampled_from("abcxyz019-") | st.characters(min_codepoint=0x80, max_codepoint=0x4FF),
    min_size=1,
    max_size=12,
)
ports = st.none() | st.integers(min_value=0, max_value=200_000).map(str) | st.just("")
authorities = st.builds(
    lambda host, tld, port: f"{host}.{tld}" + ("" if port is None else f":{port}"),
    labels,
    st.sampled_from(["example", "test", "xn--p1ai"]),
    ports,
)


def usable(url: str) -> bool:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return False
    return (port is None or 1 <= port <= 65535) and parts.netloc.isascii()


@fuzz
@given(authority=authorities)
def test_an_accepted_executor_url_is_usable(authority: str) -> None:
    url = f"https://{authority}/v1/tasks"
    try:
        parse_template(url, URL_FIELDS, "url", production=False)
    except HttpConfigError as exc:
        assert str(exc).startswith("url: ") and "\n" not in str(exc)
        return
    assert usable(url), url


@fuzz
@given(authority=authorities)
def test_an_accepted_webhook_url_is_usable(authority: str) -> None:
    url = f"https://{authority}/events"
    raw = {"url": url, "secret": "env:S", "events": ["attempt.succeeded"]}
    try:
        check_webhook(raw, 1, {"S": SECRET}, production=False)
    except WebhookConfigError as exc:
        assert str(exc).startswith("[[webhook]] #1: url: ") and "\n" not in str(exc)
        return
    assert usable(url), url


@fuzz
@given(authority=authorities)
def test_an_accepted_jwks_url_is_usable(authority: str) -> None:
    url = f"https://{authority}/jwks.json"
    try:
        load_settings(auth_jwks_url=url, auth_issuer="https://i", auth_audience="ledger")
    except SettingsError as exc:
        assert "LEDGER_AUTH_JWKS_URL: " in str(exc) and "\n" not in str(exc)
        return
    assert usable(url), url


@pytest.mark.parametrize("url", ["https://tasks.example:99999/v1", "https://t\u0430sks.example/v1"])
def test_the_planted_cases_are_refused(url: str) -> None:
    with pytest.raises(HttpConfigError):
        parse_template(url, URL_FIELDS, "url", production=False)
