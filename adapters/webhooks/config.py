"""The ``[[webhook]]`` entries of the executors file (design.md 5.10): parsing and checks.

```toml
[[webhook]]
id = "chat"                                   # optional; default from the URL
url = "https://chat-backend.internal/ledger-events"
secret = "env:LEDGER_WEBHOOK_SECRET"          # always a reference, never the value
events = ["attempt.succeeded", "proposal.declined"]
actor_id = "actor-1"                          # optional: only this actor's events
timeout_seconds = 10                          # optional, 0.5..60
start = "now"                                 # optional: "beginning" (default) or "now"
```

A problem is reported in one line naming the entry and the key; the secret
value never appears in a message (the variable that holds it does). A secret
must give at least ``MIN_SECRET_BYTES`` (24) bytes of HMAC key: ``whsec_`` and
the base64 of the key (Standard Webhooks), or a plain value of that many bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl, urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from adapters.executors.http_config import ENV_REFERENCE, LOOPBACK_HOSTS, entry_error
from adapters.urls import authority_problem
from adapters.webhooks.standard import signing_key
from domain.directory import Ident
from domain.errors import InvalidInput
from domain.notifications import NotificationType
from domain.redaction import looks_secret, secret_shaped_key

SUBSCRIPTION_ID = r"^[a-z0-9][a-z0-9_-]{0,39}$"
MIN_SECRET_BYTES = 24
"""Bytes of HMAC key a secret must give (after ``whsec_``, base64-decoded; a
plain secret's UTF-8 bytes): anything shorter can be guessed or forged."""


class WebhookConfigError(ValueError):
    """One problem with one ``[[webhook]]`` entry; names the key, never a secret."""


class WebhookEntry(BaseModel):
    """One ``[[webhook]]`` table as written (unknown keys are refused)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    id: Annotated[str | None, Field(pattern=SUBSCRIPTION_ID)] = None
    url: Annotated[str, Field(min_length=1, max_length=2048)]
    secret: Annotated[str, Field(min_length=1, max_length=200)]
    events: Annotated[
        list[Annotated[NotificationType, Field(strict=False)]], Field(min_length=1, max_length=16)
    ]
    actor_id: Ident | None = None  # as the directory's actor ids
    timeout_seconds: Annotated[float, Field(ge=0.5, le=60, strict=False)] = 10.0
    # where a new subscription starts: the whole log, or the facts from when it first runs
    start: Literal["beginning", "now"] = "beginning"


@dataclass(frozen=True)
class WebhookSubscription:
    """A checked subscription with its secret resolved (``repr`` never shows it)."""

    id: str
    url: str
    secret_env: str
    events: frozenset[NotificationType]
    actor_id: str | None = None
    timeout_seconds: float = 10.0
    secret: str = field(default="", repr=False, compare=False)
    start: str = "beginning"  # "now": told only of facts from when it first ran

    @property
    def subscriber_name(self) -> str:
        """The tracked subscriber of the log that records this subscription's deliveries."""
        return f"webhook-{self.id}"

    def wants(self, kind: NotificationType, actor_id: str | None) -> bool:
        return kind in self.events and (self.actor_id is None or self.actor_id == actor_id)


def default_id(url: str) -> str:
    """A stable id for an entry without one (changing the URL makes a new subscription)."""
    return "wh" + hashlib.sha256(url.encode()).hexdigest()[:10]


def check_webhook(
    raw: Any, position: int, environ: Mapping[str, str], *, production: bool
) -> WebhookSubscription:
    """Validate one ``[[webhook]]`` table and resolve its secret reference."""
    label = f"[[webhook]] #{position}"
    if isinstance(raw, Mapping) and isinstance(raw.get("id"), str):
        label += f" ({raw['id'][:40]})"
    try:
        entry = WebhookEntry.model_validate(raw)
    except ValidationError as exc:
        raise WebhookConfigError(f"{label}: {entry_error(exc)}") from None
    parts = urlsplit(entry.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WebhookConfigError(f"{label}: url: needs an http:// or https:// scheme and a host")
    if parts.username or parts.password:
        raise WebhookConfigError(f"{label}: url: no credentials in the URL")
    problem = authority_problem(parts)
    if problem:
        raise WebhookConfigError(f"{label}: url: {problem}")
    query_keys = [k for k, _ in parse_qsl(parts.query, keep_blank_values=True)]
    if looks_secret(entry.url) or any(secret_shaped_key(k) for k in query_keys):
        raise WebhookConfigError(
            f"{label}: url: no secrets in the URL (it is logged); the "
            "receiver checks the signature instead"
        )
    if production and parts.scheme != "https" and parts.hostname not in LOOPBACK_HOSTS:
        raise WebhookConfigError(f"{label}: url: LEDGER_ENV=production needs https://")
    reference = ENV_REFERENCE.match(entry.secret)
    if reference is None:
        raise WebhookConfigError(
            f'{label}: secret: must be "env:NAME" (the secret lives in '
            "the environment, not the file)"
        )
    variable = reference.group(1)
    secret = environ.get(variable, "")
    if not secret:
        raise WebhookConfigError(f"{label}: secret: environment variable {variable} is not set")
    try:
        key = signing_key(secret)
    except InvalidInput as exc:
        raise WebhookConfigError(f"{label}: secret (from {variable}): {exc.detail}") from None
    if len(key) < MIN_SECRET_BYTES:
        raise WebhookConfigError(
            f"{label}: secret (from {variable}): {len(key)} bytes of key, at least "
            f"{MIN_SECRET_BYTES} are needed (whsec_ and the base64 of {MIN_SECRET_BYTES} "
            "or more random bytes)"
        )
    return WebhookSubscription(
        id=entry.id or default_id(entry.url),
        url=entry.url,
        secret_env=variable,
        events=frozenset(entry.events),
        actor_id=entry.actor_id,
        timeout_seconds=entry.timeout_seconds,
        secret=secret,
        start=entry.start,
    )


def check_webhooks(
    entries: Any, name: str, environ: Mapping[str, str], *, production: bool
) -> list[WebhookSubscription]:
    """Every ``[[webhook]]`` entry of a file; ids must be unique."""
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise WebhookConfigError(f"{name}: 'webhook' must be an array of tables ([[webhook]])")
    found: list[WebhookSubscription] = []
    for position, raw in enumerate(entries, start=1):
        try:
            subscription = check_webhook(raw, position, environ, production=production)
        except WebhookConfigError as exc:
            raise WebhookConfigError(f"{name}: {exc}") from None
        if any(s.id == subscription.id for s in found):
            raise WebhookConfigError(
                f"{name}: [[webhook]] #{position}: id {subscription.id!r} is used twice"
            )
        found.append(subscription)
    return found
