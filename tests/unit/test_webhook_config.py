"""``[[webhook]]`` entries: what is accepted, and one line naming the key for the rest
(never the secret's value); the backoff is capped exponential with full jitter."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.webhooks.config import WebhookConfigError, check_webhooks, default_id
from adapters.webhooks.deliverer import BACKOFF_MAX_SECONDS, backoff_seconds
from domain.notifications import NotificationType

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
ENV = {"HOOK_SECRET": SECRET, "BAD_SECRET": "whsec_not base64!"}


def entry(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "url": "https://chat.example/hooks",
        "secret": "env:HOOK_SECRET",
        "events": ["attempt.succeeded", "proposal.declined"],
    }
    return {**base, **changes}


def check(*entries: dict[str, Any], production: bool = False) -> Any:
    return check_webhooks(list(entries), "LEDGER_EXECUTORS_FILE x.toml", ENV, production=production)


def test_an_entry_becomes_a_subscription_with_its_secret_resolved() -> None:
    (sub,) = check(entry(id="chat", actor_id="alice", timeout_seconds=2))
    assert (sub.id, sub.secret_env, sub.actor_id, sub.timeout_seconds) == (
        "chat",
        "HOOK_SECRET",
        "alice",
        2.0,
    )
    assert sub.events == {NotificationType.ATTEMPT_SUCCEEDED, NotificationType.PROPOSAL_DECLINED}
    assert sub.secret == SECRET and SECRET not in repr(sub)
    assert sub.subscriber_name == "webhook-chat"
    (unnamed,) = check(entry())
    assert unnamed.id == default_id("https://chat.example/hooks")
    assert unnamed.start == "beginning"  # as before start existed: the whole log
    (late,) = check(entry(start="now"))
    assert late.start == "now"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"secret": SECRET}, 'secret: must be "env:NAME"'),
        ({"secret": "env:MISSING"}, "environment variable MISSING is not set"),
        (
            {"secret": "env:BAD_SECRET"},
            "secret (from BAD_SECRET): webhook secret: not valid base64",
        ),
        ({"events": ["attempt.exploded"]}, "events.0"),
        ({"events": []}, "events"),
        ({"url": "chat.example/hooks"}, "url: needs an http:// or https:// scheme"),
        ({"url": "https://user:pw@chat.example/"}, "url: no credentials"),
        ({"url": "https://chat.example/hooks?token=abc"}, "url: no secrets in the URL"),
        ({"url": "https://chat.example/hooks/sk_live_abcdef"}, "url: no secrets in the URL"),
        ({"colour": "red"}, "colour: unknown key"),
        ({"id": "Not Valid"}, "id:"),
        ({"timeout_seconds": 600}, "timeout_seconds"),
        ({"start": "later"}, "start: Input should be 'beginning' or 'now'"),
    ],
)
def test_a_bad_entry_is_one_line_naming_the_key(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(WebhookConfigError) as raised:
        check(entry(**changes))
    text = str(raised.value)
    assert message in text and "\n" not in text
    assert text.startswith("LEDGER_EXECUTORS_FILE x.toml: [[webhook]] #1")
    assert SECRET not in text and "not base64!" not in text


def test_production_needs_https_and_ids_are_unique() -> None:
    with pytest.raises(WebhookConfigError, match="production needs https"):
        check(entry(url="http://chat.example/hooks"), production=True)
    assert check(entry(url="http://127.0.0.1:9/hooks"), production=True)
    with pytest.raises(WebhookConfigError, match="'chat' is used twice"):
        check(entry(id="chat"), entry(id="chat", url="https://other.example/"))


def test_backoff_is_capped_exponential_with_full_jitter() -> None:
    assert [backoff_seconds(n, 1.0) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]
    assert backoff_seconds(40, 1.0) == BACKOFF_MAX_SECONDS
    assert backoff_seconds(10_000, 1.0) == BACKOFF_MAX_SECONDS
    assert backoff_seconds(5, 0.0) == 0.0
    assert backoff_seconds(5, 0.25) == 4.0
