"""Console sessions, kept in the store so that the server can end them.

Signing in (an admin bearer token today; another way of signing in, such as
OpenID Connect, only calls :meth:`SessionStore.start` with its own ``method``)
makes a session: a 256-bit random id, given to the browser as an HttpOnly,
SameSite=Strict cookie, and a lookup item ``session#<sha256(id)>`` holding who
signed in (subject and role), how (``method``), when and until when, with that
expiry. Every console request reads the item once: a session that expired,
or that was signed out (the item is deleted), opens nothing, wherever its
cookie was copied to. Only the hash of the id is stored, so neither the store
nor a backup of it can be replayed as a cookie; expired items are swept by
housekeeping like every lookup (DynamoDB's TTL).

The session's CSRF token is derived from its id (an HMAC keyed by the id), so
it is new with every session and nothing more is stored. The cookie's
``Secure`` flag comes from the settings (``LEDGER_CONSOLE_SECURE_COOKIES``, or
an https ``LEDGER_PUBLIC_URL``), never from the request's ``Host``. The bearer
token a session was made from is never stored, shown or logged.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime

from fastapi.responses import Response

from adapters.settings import Settings
from adapters.store import LedgerStore
from api.service.principal import Principal, Role
from domain.ports import Commit, Lookup
from domain.timeutil import format_utc, parse_utc

SESSION_COOKIE = "ledger_console"
SIGNIN_COOKIE = "ledger_console_signin"  # double-submit CSRF for the sign-in form only
COOKIE_PATH = "/console"
KEY_PREFIX = "session#"
CSRF_LABEL = b"execution-ledger/console/csrf/v1"
_SESSION_ID = re.compile(r"[A-Za-z0-9_\-]{43}")  # token_urlsafe(32)


@dataclass(frozen=True)
class Session:
    """A signed-in console user: who (subject, role), how (``method``), until when."""

    subject: str
    role: Role
    method: str
    expires_at: datetime
    csrf: str
    key: str  # the store's item: what sign-out deletes

    @property
    def principal(self) -> Principal:
        """Who the console's service calls are made as."""
        return Principal(subject=self.subject, role=self.role)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def csrf_of(session_id: str) -> str:
    """The CSRF token of one session: only the holder of its id can compute it."""
    return _b64(hmac.new(session_id.encode(), CSRF_LABEL, hashlib.sha256).digest())


def _key(session_id: str) -> str:
    return KEY_PREFIX + hashlib.sha256(session_id.encode()).hexdigest()


class SessionStore:
    """Starts, finds and ends console sessions in the ledger's store."""

    def __init__(self, store: LedgerStore) -> None:
        self.store = store

    def start(
        self, *, subject: str, role: Role, method: str, now: datetime, expires_at: datetime
    ) -> tuple[str, Session]:
        """A new session: its id (the cookie's value, shown once) and the session."""
        session_id = secrets.token_urlsafe(32)
        key = _key(session_id)
        value = {
            "subject": subject,
            "role": role.value,
            "method": method,
            "signed_in_at": format_utc(now),
            "expires_at": format_utc(expires_at),
        }
        self.store.commit(Commit(lookups=[Lookup(key, value, expires_at=expires_at, now=now)]))
        return session_id, Session(subject, role, method, expires_at, csrf_of(session_id), key)

    def find(self, cookie: str | None, now: datetime) -> Session | None:
        """The live session a cookie names, or None (malformed, unknown, ended, expired).

        A value that cannot be a session id is refused before any read."""
        if not cookie or not _SESSION_ID.fullmatch(cookie):
            return None
        key = _key(cookie)
        found = self.store.get_lookup(key, now=now)
        if found is None:
            return None
        try:
            role = Role(found["role"])
            expires_at = parse_utc(found["expires_at"])
            subject, method = found["subject"], found["method"]
        except (KeyError, ValueError):
            return None
        if expires_at <= now:
            return None
        return Session(subject, role, method, expires_at, csrf_of(cookie), key)

    def end(self, session: Session) -> None:
        """Sign out: the session opens nothing any more, wherever its cookie is."""
        self.store.delete_lookup(session.key)


def signin_nonce() -> str:
    return secrets.token_urlsafe(32)


def set_cookie(response: Response, settings: Settings, name: str, value: str, max_age: int) -> None:
    """A console cookie: HttpOnly, SameSite=Strict, Secure as configured."""
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        httponly=True,
        samesite="strict",
        secure=settings.secure_cookies,
        path=COOKIE_PATH,
    )


def delete_cookie(response: Response, settings: Settings, name: str) -> None:
    """Expire a console cookie with the same attributes it was set with."""
    response.delete_cookie(
        name,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=settings.secure_cookies,
    )


def same_secret(given: str | None, expected: str | None) -> bool:
    """Constant-time comparison of two CSRF values (both must be present)."""
    if not given or not expected:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())
