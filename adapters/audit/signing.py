"""Ed25519 signatures over audit digests (the ``cryptography`` package).

The private key is a PEM file named by ``LEDGER_AUDIT_SIGNING_KEY``; a
verifier needs only the public key. A key is identified by the SHA-256 of its
raw public bytes, so a digest signed with another key is told apart from a
forged one: another key id is bad input, a bad signature under the expected
key id is tampering.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from domain.digest import Digest, Signature
from domain.errors import DigestInvalid

ALGORITHM = "Ed25519"


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise DigestInvalid(f"{what}: cannot read the key file ({exc.strerror})") from None


def load_private_key(path: str, what: str = "LEDGER_AUDIT_SIGNING_KEY") -> Ed25519PrivateKey:
    """The signing key in a PEM file; one clear line when it is not an Ed25519 key."""
    try:
        key = serialization.load_pem_private_key(_read(path, what), password=None)
    except (ValueError, TypeError):
        raise DigestInvalid(f"{what}: not an unencrypted PEM private key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise DigestInvalid(f"{what}: the key is not an Ed25519 key")
    return key


def check_signing_key(path: str | None) -> None:
    """At start-up: the configured signing key loads, or SettingsError in one line
    naming ``LEDGER_AUDIT_SIGNING_KEY`` (else every digest request would fail)."""
    if not path:
        return
    from adapters.settings import SettingsError

    try:
        load_private_key(path)
    except DigestInvalid as exc:
        raise SettingsError(f"invalid settings: {exc.detail}") from None


def load_public_key(path: str, what: str = "--public-key") -> Ed25519PublicKey:
    """A PEM public key (or the public half of a PEM private key)."""
    data = _read(path, what)
    try:
        public = serialization.load_pem_public_key(data)
    except (ValueError, TypeError):
        return load_private_key(path, what).public_key()
    if not isinstance(public, Ed25519PublicKey):
        raise DigestInvalid(f"{what}: the key is not an Ed25519 key")
    return public


def key_id(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def public_pem(private: Ed25519PrivateKey) -> str:
    return (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode("ascii")
    )


def sign(digest: Digest, private: Ed25519PrivateKey) -> Digest:
    value = base64.b64encode(private.sign(digest.statement())).decode("ascii")
    return digest.signed(Signature(ALGORITHM, key_id(private.public_key()), value))


def signature_holds(digest: Digest, public: Ed25519PublicKey) -> bool:
    """True when the digest's signature verifies under ``public``.

    Raises ``DigestInvalid`` for an unsigned digest or one signed with another key.
    """
    signature = digest.signature
    if signature is None:
        raise DigestInvalid(
            "the digest is not signed, but a key to check it was given "
            "(--public-key or LEDGER_AUDIT_SIGNING_KEY)"
        )
    if signature.alg != ALGORITHM or signature.key_id != key_id(public):
        raise DigestInvalid("the digest was signed with another key")
    try:
        public.verify(base64.b64decode(signature.value, validate=True), digest.statement())
    except (InvalidSignature, ValueError):
        return False
    return True
