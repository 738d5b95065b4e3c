"""The console's OpenID Connect settings (``LEDGER_CONSOLE_OIDC_*``), a part of
:class:`adapters.settings.Settings` kept in a module of its own.

With an issuer set, the console offers "Sign in with your identity provider"
beside the admin token: the provider's endpoints and keys come from its
discovery document, the redirect URL is ``LEDGER_PUBLIC_URL`` +
``/console/oidc/callback`` (never the request's ``Host``), and a user is an
admin when the claim ``console_oidc_admin_claim`` of the ID token is (or lists)
``console_oidc_admin_value``; with ``console_oidc_actor_claim``, another user
whose claim names an enabled directory actor is that actor's member. One
client address starts at most ``console_oidc_starts_per_minute`` sign-ins a
minute.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings

CLAIM_PATH = r"^[A-Za-z0-9_:/\-]+(\.[A-Za-z0-9_:/\-]+)*$"
CALLBACK_PATH = "/console/oidc/callback"


class ConsoleOidcSettings(BaseSettings):
    """Sign-in to the console through an OpenID Connect provider (off without an issuer)."""

    console_oidc_issuer: Annotated[str | None, Field(min_length=1, max_length=2048)] = None
    console_oidc_client_id: Annotated[str | None, Field(min_length=1, max_length=512)] = None
    console_oidc_client_secret: SecretStr | None = None  # none: a public client (PKCE only)
    console_oidc_scope: Annotated[str, Field(pattern=r"^openid( [\x21\x23-\x5b\x5d-\x7e]+)*$")] = (
        "openid"
    )
    console_oidc_admin_claim: Annotated[str, Field(pattern=CLAIM_PATH, max_length=200)] = "groups"
    console_oidc_admin_value: Annotated[str, Field(min_length=1, max_length=200)] = "ledger-admins"
    # a claim naming the user's directory actor: a non-admin who is an enabled actor
    # gets a member's session (their own pending approvals); unset: admins only
    console_oidc_actor_claim: Annotated[str | None, Field(pattern=CLAIM_PATH, max_length=200)] = (
        None
    )
    # sign-ins a client address may start per minute (api/console/ratelimit.py)
    console_oidc_starts_per_minute: Annotated[int, Field(ge=1, le=1000)] = 10

    @field_validator("console_oidc_issuer")
    @classmethod
    def _check_issuer(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("needs an http:// or https:// scheme and a host")
        if parts.username or parts.password or parts.query or parts.fragment:
            raise ValueError("no credentials, query or fragment in an issuer URL")
        return value

    @model_validator(mode="after")
    def _check_oidc(self) -> ConsoleOidcSettings:
        if self.console_oidc_issuer is None:
            return self
        if self.console_oidc_client_id is None:
            raise ValueError("LEDGER_CONSOLE_OIDC_ISSUER needs LEDGER_CONSOLE_OIDC_CLIENT_ID")
        if getattr(self, "public_url", None) is None:
            raise ValueError(
                "LEDGER_CONSOLE_OIDC_ISSUER needs LEDGER_PUBLIC_URL (the redirect URL is "
                f"LEDGER_PUBLIC_URL{CALLBACK_PATH})"
            )
        from adapters.urls import LOOPBACK_HOSTS

        parts = urlsplit(self.console_oidc_issuer)
        loopback = parts.hostname in LOOPBACK_HOSTS
        if getattr(self, "env", None) == "production" and parts.scheme != "https" and not loopback:
            raise ValueError(
                "LEDGER_CONSOLE_OIDC_ISSUER: LEDGER_ENV=production needs https:// "
                "(plain http only to a loopback host)"
            )
        return self

    @property
    def console_oidc_redirect_url(self) -> str | None:
        """Where the provider sends the browser back: LEDGER_PUBLIC_URL + the callback."""
        public_url = getattr(self, "public_url", None)
        if self.console_oidc_issuer is None or public_url is None:
            return None
        return str(public_url).rstrip("/") + CALLBACK_PATH
