"""Idempotency-Key (design.md 5.8; IETF draft "The Idempotency-Key HTTP Header Field").

A key is scoped to its caller and remembered as hashes only: one create-only
lookup item, ``idem#sha256(caller scope, key)``, holding the SHA-256 of the
caller scope, the SHA-256 of the request (method, route, path and canonical
body) and the ids of what the first request created. Each caller has a
namespace of its own: a key one caller used never refuses, nor even shows to,
another caller's request (it names another item). The item is written in the
SAME commit as the write it protects, so a crash can never leave a key without
its effect or the reverse, and it expires after ``KEEP`` (the TTL of the
lookup item; read after its expiry it is absent, and a new request with the
key replaces it).

- same caller, same request: the first answer is rebuilt from the stored ids
  (a proposal's preview is rendered again from its stored spec; a
  presentation's token is derived again, see ``derive_token``);
- the same caller with another request, a key over 255 characters or outside
  printable ASCII: the one uniform ``IdempotencyKeyRefused``;
- a concurrent duplicate that commits second fails on the create-only item and
  then answers like a retry; while the first is still in progress in the same
  process, a duplicate gets ``IdempotencyKeyInUse`` (409) instead: the keys in
  flight are kept by :class:`InFlight`, one per wired ledger, whichever entry
  point the requests came through.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from domain.canonical import canonical_json
from domain.errors import IdempotencyKeyInUse, IdempotencyKeyRefused
from domain.ports import EventStore, Lookup

MAX_KEY_CHARS = 255
KEEP = timedelta(hours=25)  # kept at least 24 hours
KEY_LABEL = "execution-ledger/idempotency/key/v1"
SCOPED_KEY_LABEL = "execution-ledger/idempotency/scoped-key/v2"
TOKEN_LABEL = b"execution-ledger/idempotency/presentation-token/v1"
_PRINTABLE = re.compile(r"[\x21-\x7e]+")


def _sha(*parts: str) -> str:
    return hashlib.sha256(canonical_json(list(parts))).hexdigest()


@dataclass(frozen=True)
class IdempotencyKey:
    """A caller's key for one request; only hashes of it are ever stored."""

    key: str
    scope: str
    request: str

    @classmethod
    def of(cls, key: str, *, scope: str, method: str, route: str, body: Any) -> IdempotencyKey:
        """Validate the header value and fingerprint the request it came with."""
        if not 1 <= len(key) <= MAX_KEY_CHARS or not _PRINTABLE.fullmatch(key):
            raise IdempotencyKeyRefused()
        fingerprint = hashlib.sha256(
            canonical_json({"method": method, "route": route, "body": body})
        ).hexdigest()
        return cls(key=key, scope=scope, request=fingerprint)

    @property
    def lookup_key(self) -> str:
        """The caller's own item for this key: the scope is part of its name."""
        return "idem#" + _sha(SCOPED_KEY_LABEL, self.scope, self.key)

    @property
    def legacy_lookup_key(self) -> str:
        """Where a key was kept when all callers shared one namespace (items
        written before this version; they expire within ``KEEP`` of the upgrade)."""
        return "idem#" + _sha(KEY_LABEL, self.key)

    def stored_answer(self, store: EventStore, now: datetime) -> Mapping[str, str] | None:
        """The first request's stored ids, None for a new (or expired) key; refused
        when the key came with another request of this caller.

        An item of the shared namespace used before is read too, so a retry that
        straddles the upgrade still gets its first answer; another caller's item
        there is not this caller's key (None)."""
        found = store.get_lookup(self.lookup_key, now=now)
        if found is None:
            found = store.get_lookup(self.legacy_lookup_key, now=now)
            if found is None or not self._same_scope(found):
                return None
        if not self._same_scope(found):
            raise IdempotencyKeyRefused()
        if not hmac.compare_digest(found.get("request", ""), self.request):
            raise IdempotencyKeyRefused()
        return found

    def _same_scope(self, found: Mapping[str, str]) -> bool:
        return hmac.compare_digest(found.get("scope", ""), _sha(KEY_LABEL, self.scope))

    def record(self, now: datetime, **answer: str) -> Lookup:
        """The lookup item to commit with the write (it replaces an expired one)."""
        value = {"scope": _sha(KEY_LABEL, self.scope), "request": self.request, **answer}
        return Lookup(key=self.lookup_key, value=value, expires_at=now + KEEP, now=now)

    def derive_token(self, salt: str, presentation_id: str) -> str:
        """A presentation token only this caller's retry can derive again.

        HMAC-SHA256 keyed by the raw Idempotency-Key (never stored) over a fresh
        256-bit random salt (stored), the scope and the presentation id: the
        store keeps the token's hash and the salt, and the token exists only in
        the answers to the caller who holds the key."""
        message = canonical_json([salt, self.scope, presentation_id])
        digest = hmac.new(self.key.encode("ascii"), TOKEN_LABEL + message, hashlib.sha256)
        return base64.urlsafe_b64encode(digest.digest()).decode().rstrip("=")


class InFlight:
    """Keys of the requests being processed right now in this process."""

    def __init__(self) -> None:
        self._keys: set[str] = set()
        self._lock = threading.Lock()

    @contextmanager
    def hold(self, key: IdempotencyKey | None) -> Iterator[None]:
        """Hold ``key`` for the block; ``IdempotencyKeyInUse`` while another holds it."""
        if key is None:
            yield
            return
        with self._lock:
            if key.lookup_key in self._keys:
                raise IdempotencyKeyInUse()
            self._keys.add(key.lookup_key)
        try:
            yield
        finally:
            with self._lock:
                self._keys.discard(key.lookup_key)
