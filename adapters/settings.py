"""Typed settings: the single source of configuration (``LEDGER_`` prefix).

Nothing is read at import time: call :func:`load_settings` at start-up, which
turns every validation problem into one clear ``SettingsError`` message.
"""

from __future__ import annotations

import re
from enum import StrEnum
from itertools import pairwise
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import NoDecode, SettingsConfigDict

# re-exported: the misspelled-variable warnings compare names with these settings
from adapters.setting_names import (
    referenced_variables,
    setting_variables,
    unknown_variable_warnings,
    unknown_variables,
)
from adapters.settings_oidc import ConsoleOidcSettings
from domain.services.watch_schedule import DEFAULT_NO_EFFECT_WATCH

DEVELOPMENT_SECRET = "development-only-secret-change-me-0123456789abcdef"
MAX_WATCH_LOOKS = 10
MAX_WATCH_SECONDS = 30 * 86400
DEFAULT_MAX_TOKEN_LIFETIME_SECONDS = 86400
MIN_HS256_SECRET_CHARS = 32
ENV_PREFIX = "LEDGER_"
# A claim name, or a dotted path into nested claims (``realm_access.roles``).
CLAIM_PATH = r"^[A-Za-z0-9_:/\-]+(\.[A-Za-z0-9_:/\-]+)*$"
CHANNEL_NAME = re.compile(r"[a-z][a-z0-9_.\-]{0,63}")


__all__ = [
    "Settings",
    "SettingsError",
    "load_settings",
    "referenced_variables",
    "setting_variables",
    "unknown_variable_warnings",
    "unknown_variables",
]


class SettingsError(Exception):
    """Settings are invalid; the message says which and why, never a secret value."""


class Environment(StrEnum):
    DEVELOPMENT = "development"
    PRODUCTION = "production"
    TEST = "test"


class LogFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


class StoreKind(StrEnum):
    SQLITE = "sqlite"
    DYNAMODB = "dynamodb"
    MEMORY = "memory"


class Settings(ConsoleOidcSettings):
    """Every knob of the ledger with a safe default and validated bounds."""

    model_config = SettingsConfigDict(env_prefix="LEDGER_", frozen=True, extra="ignore")

    env: Environment = Environment.DEVELOPMENT
    store: StoreKind = StoreKind.SQLITE
    sqlite_path: str = "./var/ledger.db"
    dynamodb_table: Annotated[
        str, Field(min_length=3, max_length=255, pattern=r"^[A-Za-z0-9_.\-]+$")
    ] = "ledger"
    # A SecretStr: no repr, str or log line of the settings ever shows it.
    auth_hs256_secret: SecretStr = SecretStr(DEVELOPMENT_SECRET)
    auth_rs256_public_key: str | None = None
    # An identity provider's JSON Web Key Set (RS256 and ES256 tokens); with it,
    # LEDGER_AUTH_ISSUER and LEDGER_AUTH_AUDIENCE are required.
    auth_jwks_url: Annotated[str | None, Field(min_length=1, max_length=2048)] = None
    auth_jwks_max_keys: Annotated[int, Field(ge=1, le=256)] = 32
    auth_jwks_max_bytes: Annotated[int, Field(ge=1024, le=1024 * 1024)] = 64 * 1024
    # at most one fetch of the key set per this many seconds, however many
    # tokens name an unknown key (those fail closed in between)
    auth_jwks_min_refresh_seconds: Annotated[int, Field(ge=1, le=3600)] = 30
    auth_jwks_cache_seconds: Annotated[int, Field(ge=10, le=86400)] = 300
    auth_jwks_timeout_seconds: Annotated[float, Field(ge=0.5, le=30)] = 5.0
    # when set, every token (any algorithm) must carry exactly these iss and aud
    auth_issuer: Annotated[str | None, Field(min_length=1, max_length=1024)] = None
    auth_audience: Annotated[str | None, Field(min_length=1, max_length=1024)] = None
    auth_leeway_seconds: Annotated[int, Field(ge=0, le=300)] = 0
    auth_role_claim: Annotated[str, Field(max_length=256, pattern=CLAIM_PATH)] = "role"
    auth_subject_claim: Annotated[str, Field(max_length=256, pattern=CLAIM_PATH)] = "sub"
    auth_channel_claim: Annotated[str, Field(max_length=256, pattern=CLAIM_PATH)] = "channel"
    # channel services registered by subject: "telegram-bot=telegram,slack-app=slack"
    auth_channel_services: Annotated[tuple[tuple[str, str], ...], NoDecode] = ()
    # exp - iat (or exp - now without iat) of any accepted bearer token
    auth_max_token_lifetime_seconds: Annotated[int, Field(ge=60, le=30 * 86400)] = (
        DEFAULT_MAX_TOKEN_LIFETIME_SECONDS
    )
    permissions: Annotated[tuple[str, ...], NoDecode] = (
        "tasks.write",
        "social.post",
        "demo.execute",
    )
    presentation_ttl_seconds: Annotated[int, Field(ge=60, le=86400)] = 1800
    # live (unexpired, unconsumed) presentations one proposal version may have
    max_active_presentations: Annotated[int, Field(ge=1, le=200)] = 20
    # directory records and proposals kept in memory per process (0: none); safe
    # at any size because every cached read is condition-checked by its commit
    read_cache_entries: Annotated[int, Field(ge=0, le=1_000_000)] = 4096
    lease_seconds: Annotated[int, Field(ge=5, le=900)] = 60
    backoff_base_seconds: Annotated[int, Field(ge=1, le=3600)] = 1
    backoff_max_seconds: Annotated[int, Field(ge=1, le=86400)] = 300
    max_predispatch_leases: Annotated[int, Field(ge=1, le=50)] = 5
    max_dispatches: Annotated[int, Field(ge=1, le=50)] = 5
    # the due index's buckets on a DynamoDB table whose layout record holds no
    # count (one made by an older version): a table that records one uses it
    due_work_buckets: Annotated[int, Field(ge=1, le=256)] = 16
    recovery_interval_seconds: Annotated[int, Field(ge=1, le=3600)] = 30
    # a queued attempt no worker with its build has taken for this long is on the
    # attention list as waiting_for_build (projections.attention)
    waiting_for_build_seconds: Annotated[int, Field(ge=10, le=7 * 86400)] = 600
    # attempts one process works on at once (ledger serve, ledger worker), in all
    # and per executor build: a slow provider's attempts wait behind their own bound
    worker_concurrency: Annotated[int, Field(ge=1, le=256)] = 16
    worker_concurrency_per_build: Annotated[int, Field(ge=1, le=256)] = 4
    # on SIGTERM: how long in-flight executor calls (and HTTP requests) may take
    # to finish and be recorded before the process exits anyway (recovery covers them)
    shutdown_grace_seconds: Annotated[float, Field(ge=0, le=900)] = 25
    # I12: after a lookup's "not applied" (failed_safe) or a no_effect resolution of
    # a correlation_lookup attempt, look again this many seconds after it, read-only
    no_effect_watch_seconds: Annotated[tuple[int, ...], NoDecode] = DEFAULT_NO_EFFECT_WATCH
    fake_executors: bool | None = None
    fake_effects_file: str | None = None  # the fakes' effect ledger, shared by processes
    # the fake correlation_lookup executor's settle window; unset: the default window
    fake_settle_seconds: Annotated[float | None, Field(ge=0, le=3600)] = None
    executors_file: Annotated[str | None, Field(min_length=1, max_length=4096)] = None
    # ledger serve: a request's headers / body must arrive within these bounds,
    # idle keep-alive connections close after http_keep_alive_seconds, and at
    # most http_max_connections are open (fitted under the descriptor limit)
    http_header_timeout_seconds: Annotated[float, Field(ge=0.5, le=300)] = 10
    http_body_timeout_seconds: Annotated[float, Field(ge=0.5, le=600)] = 30
    http_keep_alive_seconds: Annotated[int, Field(ge=1, le=300)] = 5
    http_max_connections: Annotated[int, Field(ge=8, le=65536)] = 512
    execution_enabled: bool = True  # false: the AWS worker leases nothing; work stays due
    # Audit digests (design.md 5.11): the Ed25519 PEM private key that signs them,
    # the name that ties a digest to this ledger, and the periodic checkpoints of
    # `ledger serve` (off unless a directory is set).
    audit_signing_key: str | None = None
    audit_ledger_id: Annotated[str | None, Field(min_length=1, max_length=200)] = None
    audit_checkpoint_dir: str | None = None
    audit_checkpoint_interval_seconds: Annotated[int, Field(ge=10, le=86400)] = 3600
    audit_checkpoint_bucket: str | None = None  # AWS: the checkpoint function's S3 bucket
    # None: text in development and test, one JSON object per line in production
    log_format: LogFormat | None = None
    # host:port of a separate metrics listener (no token; the bound address is the guard)
    metrics_listen: str | None = None
    console_session_seconds: Annotated[int, Field(ge=60, le=43200)] = 900
    # where browsers reach the console (https:// makes its cookies Secure), or the
    # explicit choice; never taken from a request's Host header
    public_url: Annotated[str | None, Field(min_length=1, max_length=2048)] = None
    console_secure_cookies: bool | None = None
    # a delivered webhook record keeps its body this long, then becomes a tombstone
    webhook_retention_seconds: Annotated[int, Field(ge=3600, le=366 * 86400)] = 7 * 86400
    # the longest wait between two sends of a failing webhook delivery (full jitter below it)
    webhook_backoff_max_seconds: Annotated[int, Field(ge=1, le=86400)] = 300

    @field_validator("auth_hs256_secret")
    @classmethod
    def _check_secret_length(cls, value: SecretStr) -> SecretStr:
        if len(value.get_secret_value()) < MIN_HS256_SECRET_CHARS:
            raise ValueError(f"must be at least {MIN_HS256_SECRET_CHARS} characters")
        return value

    @field_validator("permissions", mode="before")
    @classmethod
    def _split_permissions(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [p.strip() for p in value.split(",") if p.strip()]
        return value

    @field_validator("permissions")
    @classmethod
    def _check_permissions(cls, value: tuple[str, ...]) -> tuple[str, ...]:

        if not value:
            raise ValueError("at least one permission is required")
        for name in value:
            if not re.fullmatch(r"[a-z][a-z0-9_.\-]{0,63}", name):
                raise ValueError(f"invalid permission name {name!r}")
        return tuple(dict.fromkeys(value))

    @field_validator("auth_channel_services", mode="before")
    @classmethod
    def _split_channel_services(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        pairs: list[tuple[str, str]] = []
        for item in (part.strip() for part in value.split(",")):
            if not item:
                continue
            subject, sep, channel = (text.strip() for text in item.partition("="))
            if not sep or not subject or not channel:
                raise ValueError("must be subject=channel pairs, e.g. telegram-bot=telegram")
            pairs.append((subject, channel))
        return tuple(pairs)

    @field_validator("auth_channel_services")
    @classmethod
    def _check_channel_services(
        cls, value: tuple[tuple[str, str], ...]
    ) -> tuple[tuple[str, str], ...]:
        seen: set[str] = set()
        for subject, channel in value:
            if not 1 <= len(subject) <= 256 or not subject.isprintable():
                raise ValueError("a subject must be 1..256 printable characters")
            if not CHANNEL_NAME.fullmatch(channel):
                raise ValueError(f"invalid channel name {channel!r} (like telegram or slack)")
            if subject in seen:
                raise ValueError(f"the subject {subject!r} is listed twice")
            seen.add(subject)
        return value

    @field_validator("auth_jwks_url")
    @classmethod
    def _check_jwks_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from adapters.urls import authority_problem

        try:
            parts = urlsplit(value)
        except ValueError:
            raise ValueError("not a valid URL") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("needs an http:// or https:// scheme and a host")
        if parts.username or parts.password or parts.fragment:
            raise ValueError("no credentials or fragment in the URL")
        problem = authority_problem(parts)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("public_url")
    @classmethod
    def _check_public_url(cls, value: str | None) -> str | None:
        parts = urlsplit(value or "https://x")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("needs an http:// or https:// scheme and a host")
        return value

    @field_validator("no_effect_watch_seconds", mode="before")
    @classmethod
    def _split_watch(cls, value: Any) -> Any:
        if isinstance(value, str):
            parts = [p.strip() for p in value.split(",") if p.strip()]
            if not all(p.isdigit() for p in parts):
                raise ValueError("must be whole seconds separated by commas, e.g. 60,600,3600")
            value = [int(p) for p in parts]
        return value

    @field_validator("no_effect_watch_seconds")
    @classmethod
    def _check_watch(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not 1 <= len(value) <= MAX_WATCH_LOOKS:
            raise ValueError(f"must name 1 to {MAX_WATCH_LOOKS} looks")
        if any(not 1 <= v <= MAX_WATCH_SECONDS for v in value):
            raise ValueError(f"each look must be 1..{MAX_WATCH_SECONDS} seconds after")
        if any(b <= a for a, b in pairwise(value)):
            raise ValueError("the looks must be in increasing order")
        return value

    @field_validator("metrics_listen")
    @classmethod
    def _check_metrics_listen(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        host, sep, port = value.rpartition(":")
        if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError("must be host:port, e.g. 127.0.0.1:9464")
        return value

    @model_validator(mode="after")
    def _check_consistency(self) -> Settings:
        if self.backoff_max_seconds < self.backoff_base_seconds:
            raise ValueError("LEDGER_BACKOFF_MAX_SECONDS must be >= LEDGER_BACKOFF_BASE_SECONDS")
        if self.auth_jwks_url and not (self.auth_issuer and self.auth_audience):
            raise ValueError(
                "LEDGER_AUTH_JWKS_URL needs LEDGER_AUTH_ISSUER and LEDGER_AUTH_AUDIENCE "
                "(an identity provider signs tokens for many audiences)"
            )
        if self.auth_jwks_cache_seconds < self.auth_jwks_min_refresh_seconds:
            raise ValueError(
                "LEDGER_AUTH_JWKS_CACHE_SECONDS must be >= LEDGER_AUTH_JWKS_MIN_REFRESH_SECONDS"
            )
        if self.worker_concurrency_per_build > self.worker_concurrency:
            raise ValueError(
                "LEDGER_WORKER_CONCURRENCY_PER_BUILD must be <= LEDGER_WORKER_CONCURRENCY"
            )
        if self.env is Environment.PRODUCTION:
            if self.uses_development_secret and not (
                self.auth_rs256_public_key or self.auth_jwks_url
            ):
                raise ValueError(
                    "LEDGER_ENV=production refuses the built-in development secret; "
                    "set LEDGER_AUTH_HS256_SECRET, LEDGER_AUTH_RS256_PUBLIC_KEY "
                    "or LEDGER_AUTH_JWKS_URL"
                )
            if self.auth_jwks_url and not self._loopback_or_https(self.auth_jwks_url):
                raise ValueError(
                    "LEDGER_AUTH_JWKS_URL: LEDGER_ENV=production needs https:// "
                    "(plain http only to a loopback host)"
                )
            if self.fake_executors:
                raise ValueError("LEDGER_ENV=production refuses LEDGER_FAKE_EXECUTORS=true")
        return self

    @property
    def fake_executors_enabled(self) -> bool:
        """Fake executors default to on in development and test, off in production."""
        if self.fake_executors is None:
            return self.env is not Environment.PRODUCTION
        return self.fake_executors

    @property
    def ledger_id(self) -> str:
        """The name a digest carries: LEDGER_AUDIT_LEDGER_ID, else the store and its table/file."""
        if self.audit_ledger_id:
            return self.audit_ledger_id
        if self.store is StoreKind.DYNAMODB:
            return f"dynamodb:{self.dynamodb_table}"
        if self.store is StoreKind.SQLITE:
            from pathlib import PurePath

            return f"sqlite:{PurePath(self.sqlite_path).name}"
        return "memory"

    @property
    def effective_log_format(self) -> LogFormat:
        """JSON lines in production unless LEDGER_LOG_FORMAT says otherwise."""
        if self.log_format is None:
            return LogFormat.JSON if self.env is Environment.PRODUCTION else LogFormat.TEXT
        return self.log_format

    @property
    def metrics_address(self) -> tuple[str, int] | None:
        """(host, port) of the separate metrics listener, when configured."""
        if self.metrics_listen is None:
            return None
        host, _, port = self.metrics_listen.rpartition(":")
        return host.strip("[]"), int(port)

    @property
    def secure_cookies(self) -> bool:
        """Console cookies are ``Secure``: LEDGER_CONSOLE_SECURE_COOKIES, else
        whether LEDGER_PUBLIC_URL is https, else in production only."""
        if self.console_secure_cookies is not None:
            return self.console_secure_cookies
        if self.public_url is not None:
            return urlsplit(self.public_url).scheme == "https"
        return self.env is Environment.PRODUCTION

    @property
    def channel_services(self) -> dict[str, str]:
        """LEDGER_AUTH_CHANNEL_SERVICES: the channel of each registered service subject."""
        return dict(self.auth_channel_services)

    @property
    def uses_development_secret(self) -> bool:
        return self.auth_hs256_secret.get_secret_value() == DEVELOPMENT_SECRET

    @staticmethod
    def _loopback_or_https(url: str) -> bool:
        from adapters.urls import LOOPBACK_HOSTS

        parts = urlsplit(url)
        return parts.scheme == "https" or parts.hostname in LOOPBACK_HOSTS


def load_settings(**overrides: Any) -> Settings:
    """Read settings from the environment (and overrides); raise one clear error."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_input=False, include_url=False):
            loc = "_".join(str(p) for p in err["loc"]).upper()
            name = f"LEDGER_{loc}" if loc else "settings"
            message = err["msg"].removeprefix("Value error, ")
            problems.append(f"{name}: {message}")
        raise SettingsError("invalid settings: " + "; ".join(problems)) from None
