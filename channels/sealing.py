"""Presentation tokens at rest: sealed with AES-GCM under the state key.

The service must hold a presentation's token until the actor decides (it is
what approves), and must survive a restart meanwhile, so the token is kept in
the state file, sealed: AES-256-GCM with a random nonce, bound to the row it
belongs to (the reference is the associated data, so a sealed token copied to
another row does not open). The key is a setting (``*_STATE_KEY``), never in
the file. A token is erased from the file once it is decided or expired.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEY_BYTES = 32
NONCE_BYTES = 12
_HEX = re.compile(r"[0-9a-fA-F]{64}")


class SealError(Exception):
    """A sealed token does not open under this key (another key, or a changed file)."""


def parse_key(text: str) -> bytes:
    """A 32-byte key from 64 hex characters or base64 (standard or URL-safe)."""
    text = text.strip()
    if _HEX.fullmatch(text):
        return bytes.fromhex(text)
    try:
        key = base64.b64decode(text.replace("-", "+").replace("_", "/") + "==", validate=False)
    except (binascii.Error, ValueError):
        raise ValueError("must be 32 bytes: 64 hex characters or base64") from None
    if len(key) != KEY_BYTES:
        raise ValueError("must be 32 bytes: 64 hex characters or base64")
    return key


class Sealer:
    """Seals and opens tokens, and keys a MAC to recognise a token sent again."""

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError("the state key must be 32 bytes")
        self._aead = AESGCM(_subkey(key, b"seal"))
        self._mac_key = _subkey(key, b"mac")

    def seal(self, token: str, context: str) -> bytes:
        nonce = os.urandom(NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, token.encode("utf-8"), context.encode("utf-8"))

    def open(self, sealed: bytes, context: str) -> str:
        nonce, body = sealed[:NONCE_BYTES], sealed[NONCE_BYTES:]
        try:
            return self._aead.decrypt(nonce, body, context.encode("utf-8")).decode("utf-8")
        except (InvalidTag, ValueError):
            raise SealError("a sealed token does not open under this state key") from None

    def mac(self, value: str) -> str:
        """A keyed digest: the same token gives the same value, nobody else can compute it."""
        return hmac.new(self._mac_key, value.encode("utf-8"), hashlib.sha256).hexdigest()


def _subkey(key: bytes, label: bytes) -> bytes:
    return hmac.new(key, b"execution-ledger/channel/" + label, hashlib.sha256).digest()
