"""Console sessions: an admin bearer token is exchanged for a short-lived signed cookie.

The cookie is HttpOnly, SameSite=Strict and Secure unless the console is
served over plain HTTP on a loopback address (development). It holds the
subject, the expiry and the session's CSRF token, signed with HMAC-SHA256
under a random key of this process (a restart signs everyone out; it is
never derived from, nor reveals, a token). The bearer token itself is never
stored, shown or logged.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from datetime import datetime

from api.service.principal import Principal, Role

SESSION_COOKIE = "ledger_console"
SIGNIN_COOKIE = "ledger_console_signin"  # double-submit CSRF for the sign-in form only


@dataclass(frozen=True)
class Session:
    """A signed-in admin."""

    subject: str
    expires_at: int
    csrf: str

    @property
    def principal(self) -> Principal:
        """Who the console's service calls are made as: this admin."""
        return Principal(subject=self.subject, role=Role.ADMIN)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class SessionSigner:
    """Issues and checks session cookies under one random key."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key or secrets.token_bytes(32)

    def _mac(self, payload: str) -> str:
        return _b64(hmac.new(self._key, payload.encode(), hashlib.sha256).digest())

    def issue(self, subject: str, expires_at: int) -> tuple[str, Session]:
        session = Session(subject=subject, expires_at=expires_at, csrf=secrets.token_urlsafe(32))
        payload = _b64(
            json.dumps(
                {"sub": subject, "exp": expires_at, "csrf": session.csrf}, separators=(",", ":")
            ).encode()
        )
        return f"{payload}.{self._mac(payload)}", session

    def check(self, cookie: str | None, now: datetime) -> Session | None:
        """The session a cookie proves, or None (bad shape, bad MAC, expired)."""
        if not cookie or len(cookie) > 1024 or cookie.count(".") != 1:
            return None
        payload, mac = cookie.split(".")
        if not hmac.compare_digest(mac, self._mac(payload)):
            return None
        try:
            data = json.loads(_unb64(payload))
            session = Session(
                subject=str(data["sub"]), expires_at=int(data["exp"]), csrf=str(data["csrf"])
            )
        except (ValueError, KeyError, TypeError):
            return None
        if session.expires_at <= int(now.timestamp()):
            return None
        return session

    def signin_nonce(self) -> str:
        return secrets.token_urlsafe(32)


def same_secret(given: str | None, expected: str | None) -> bool:
    """Constant-time comparison of two CSRF values (both must be present)."""
    if not given or not expected:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())
