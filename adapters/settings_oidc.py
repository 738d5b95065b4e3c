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

At the token endpoint the console authenticates as its client the way
``console_oidc_token_endpoint_auth_method`` says (the provider's name for the
client's registered method): ``client_secret_basic`` (the secret in HTTP
Basic, the default with a secret), ``client_secret_post`` (the secret in the
form), ``private_key_jwt`` (an assertion signed with the PEM private key of
``console_oidc_private_key_file``, its ``kid`` ``console_oidc_private_key_id``;
the default with either) or ``none`` (a public client, PKCE only; the
default with neither). A combination that cannot work (a method without its
credential, or a credential the method would not send) is refused in one line.
"""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings

CLAIM_PATH = r"^[A-Za-z0-9_:/\-]+(\.[A-Za-z0-9_:/\-]+)*$"
CALLBACK_PATH = "/console/oidc/callback"
TokenEndpointAuthMethod = Literal[
    "client_secret_basic", "client_secret_post", "private_key_jwt", "none"
]
AUTH_METHOD_VARIABLE = "LEDGER_CONSOLE_OIDC_TOKEN_ENDPOINT_AUTH_METHOD"


class ConsoleOidcSettings(BaseSettings):
    """Sign-in to the console through an OpenID Connect provider (off without an issuer)."""

    console_oidc_issuer: Annotated[str | None, Field(min_length=1, max_length=2048)] = None
    console_oidc_client_id: Annotated[str | None, Field(min_length=1, max_length=512)] = None
    console_oidc_client_secret: SecretStr | None = None  # none: a public client (PKCE only)
    # None: derived from the credential given (console_oidc_token_auth_method)
    console_oidc_token_endpoint_auth_method: TokenEndpointAuthMethod | None = None
    console_oidc_private_key_file: Annotated[str | None, Field(min_length=1, max_length=4096)] = (
        None
    )
    console_oidc_private_key_id: Annotated[str | None, Field(pattern=r"^[\x21-\x7e]{1,200}$")] = (
        None
    )
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
        self._check_token_endpoint_auth()
        from adapters.urls import LOOPBACK_HOSTS

        parts = urlsplit(self.console_oidc_issuer)
        loopback = parts.hostname in LOOPBACK_HOSTS
        if getattr(self, "env", None) == "production" and parts.scheme != "https" and not loopback:
            raise ValueError(
                "LEDGER_CONSOLE_OIDC_ISSUER: LEDGER_ENV=production needs https:// "
                "(plain http only to a loopback host)"
            )
        return self

    def _check_token_endpoint_auth(self) -> None:
        method = self.console_oidc_token_auth_method
        named = f"{AUTH_METHOD_VARIABLE}={method}"
        if self.console_oidc_token_endpoint_auth_method is None:
            named = f"{AUTH_METHOD_VARIABLE} (unset: {method})"
        secret = self.console_oidc_client_secret is not None
        key_file = self.console_oidc_private_key_file is not None
        key_id = self.console_oidc_private_key_id is not None
        if method in ("client_secret_basic", "client_secret_post") and not secret:
            raise ValueError(f"{named} needs LEDGER_CONSOLE_OIDC_CLIENT_SECRET")
        if method in ("private_key_jwt", "none") and secret:
            raise ValueError(
                f"{named} sends no client secret: unset LEDGER_CONSOLE_OIDC_CLIENT_SECRET"
            )
        if method == "private_key_jwt" and not (key_file and key_id):
            raise ValueError(
                f"{named} needs LEDGER_CONSOLE_OIDC_PRIVATE_KEY_FILE and "
                "LEDGER_CONSOLE_OIDC_PRIVATE_KEY_ID (its kid)"
            )
        if method != "private_key_jwt" and (key_file or key_id):
            raise ValueError(
                "LEDGER_CONSOLE_OIDC_PRIVATE_KEY_FILE and LEDGER_CONSOLE_OIDC_PRIVATE_KEY_ID "
                f"are for {AUTH_METHOD_VARIABLE}=private_key_jwt, not {method}"
            )

    @property
    def console_oidc_token_auth_method(self) -> TokenEndpointAuthMethod:
        """How the console authenticates at the token endpoint: the setting, or
        what the credential given implies."""
        if self.console_oidc_token_endpoint_auth_method is not None:
            return self.console_oidc_token_endpoint_auth_method
        if self.console_oidc_client_secret is not None:
            return "client_secret_basic"
        if self.console_oidc_private_key_file or self.console_oidc_private_key_id:
            return "private_key_jwt"
        return "none"

    @property
    def console_oidc_redirect_url(self) -> str | None:
        """Where the provider sends the browser back: LEDGER_PUBLIC_URL + the callback."""
        public_url = getattr(self, "public_url", None)
        if self.console_oidc_issuer is None or public_url is None:
            return None
        return str(public_url).rstrip("/") + CALLBACK_PATH
