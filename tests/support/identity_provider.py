"""A stand-in identity provider on loopback: a JSON Web Key Set and the tokens
it signs, for the JWKS tests and the README.

    python -m tests.support.identity_provider --port P --issuer URL --audience NAME

serves ``GET /jwks.json`` (the public keys: one RSA and one EC P-256 key) and
``POST /token`` with a JSON object of claims (``sub``, ``role``, ``channel``...),
answered with a token signed by its current RSA key (``"alg": "ES256"`` in the
body: by its EC key), carrying its ``iss``, the ``aud`` and a 10-minute
``exp``. A real provider authenticates the client first; this one signs what
it is asked for, which is all a test needs.

:class:`IdentityProvider` runs one in-process on a thread, with keys to
rotate and a count of the key set requests it answered.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

TOKEN_SECONDS = 600


class SigningKey:
    """One private key and its public JWK (RS256 for RSA, ES256 for EC P-256)."""

    def __init__(self, kid: str, algorithm: str = "RS256") -> None:
        self.kid = kid
        self.algorithm = algorithm
        if algorithm == "RS256":
            self.private: Any = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            public = json.loads(RSAAlgorithm.to_jwk(self.private.public_key()))
        else:
            self.private = ec.generate_private_key(ec.SECP256R1())
            public = json.loads(ECAlgorithm.to_jwk(self.private.public_key()))
        self.jwk: dict[str, Any] = {**public, "kid": kid, "use": "sig", "alg": algorithm}

    def sign(self, claims: dict[str, Any], **header: Any) -> str:
        return jwt.encode(
            claims, self.private, algorithm=self.algorithm, headers={"kid": self.kid, **header}
        )


class IdentityProvider:
    """A JWKS endpoint on 127.0.0.1 and a token signer, in this process."""

    def __init__(self, issuer: str = "https://idp.test/realm", audience: str = "ledger") -> None:
        self.issuer = issuer
        self.audience = audience
        self.keys = [SigningKey("rsa-1"), SigningKey("ec-1", "ES256")]
        self.jwks_requests = 0
        self.document: bytes | None = None  # served instead of the keys when set
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- tokens -----------------------------------------------------------------

    def claims(self, sub: str, role: Any, **extra: Any) -> dict[str, Any]:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "aud": self.audience,
            "sub": sub,
            "role": role,
            "iat": now,
            "exp": now + TOKEN_SECONDS,
        }
        claims.update(extra)
        return {k: v for k, v in claims.items() if v is not None}

    def token(
        self, sub: str, role: Any = "admin", *, key: SigningKey | None = None, **extra: Any
    ) -> str:
        """A token signed by ``key`` (the first RSA key by default)."""
        signer = key or next(k for k in self.keys if k.algorithm == "RS256")
        return signer.sign(self.claims(sub, role, **extra))

    def rotate(self, kid: str, algorithm: str = "RS256") -> SigningKey:
        """Publish a new key first in the set; the old ones stay until :meth:`retire`."""
        new = SigningKey(kid, algorithm)
        with self._lock:
            self.keys.insert(0, new)
        return new

    def retire(self, kid: str) -> None:
        with self._lock:
            self.keys = [k for k in self.keys if k.kid != kid]

    def jwks(self) -> bytes:
        with self._lock:
            if self.document is not None:
                return self.document
            return json.dumps({"keys": [k.jwk for k in self.keys]}).encode()

    # -- the server -------------------------------------------------------------

    @property
    def url(self) -> str:
        assert self._server is not None, "start() first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def jwks_url(self) -> str:
        return self.url + "/jwks.json"

    def start(self, port: int = 0) -> IdentityProvider:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path != "/jwks.json":
                    self._answer(404, b"{}")
                    return
                with provider._lock:
                    provider.jwks_requests += 1
                self._answer(200, provider.jwks())

            def do_POST(self) -> None:
                if self.path != "/token":
                    self._answer(404, b"{}")
                    return
                length = int(self.headers.get("content-length") or 0)
                try:
                    asked = json.loads(self.rfile.read(length) or b"{}")
                    algorithm = asked.pop("alg", "RS256")
                    key = next(k for k in provider.keys if k.algorithm == algorithm)
                    sub, role = asked.pop("sub"), asked.pop("role", None)
                    token = provider.token(sub, role, key=key, **asked)
                except (ValueError, KeyError, StopIteration):
                    self._answer(400, b'{"error": "send a JSON object with sub"}')
                    return
                self._answer(200, json.dumps({"access_token": token}).encode())

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> IdentityProvider:
        return self.start()

    def __exit__(self, *_: Any) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--issuer", required=True)
    parser.add_argument("--audience", required=True)
    args = parser.parse_args()
    provider = IdentityProvider(args.issuer, args.audience).start(args.port)
    print(f"identity provider on {provider.url}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
