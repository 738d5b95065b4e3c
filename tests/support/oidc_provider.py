"""A real OpenID Connect provider on loopback for tests: Authlib's authorization
server (authorization code grant, OpenID Connect ID tokens, PKCE required,
single-use codes) in a Flask app served by Werkzeug on a thread.

Users sign in at its ``/authorize`` form by name (``POST username=...``); each
user's claims are given to the constructor. Discovery and the key set are
served at the standard paths. Its client authenticates at the token endpoint
by one method only, ``client.auth_method`` (``client_secret_basic`` unless set:
``client_secret_post``, ``private_key_jwt`` against ``client.public_keys``, or
``none``); every other method is refused as a real provider refuses it, and
``authenticated`` records the method of each accepted token request. ``host``
names it in the issuer (``localhost`` makes it another site than a ledger on
127.0.0.1, as a real provider is).
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import grants
from authlib.oauth2.rfc7523 import JWTBearerClientAssertion
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oidc.core import UserInfo
from authlib.oidc.core.grants import OpenIDCode
from flask import Flask, jsonify, request
from joserfc.jwk import KeySet, RSAKey
from werkzeug.serving import make_server

AUTH_METHODS = ["client_secret_basic", "client_secret_post", "private_key_jwt", "none"]


@dataclass
class Client:
    client_id: str
    client_secret: str
    redirect_uri: str
    auth_method: str = "client_secret_basic"
    """The one method this client may authenticate with at the token endpoint."""
    public_keys: list[dict[str, Any]] = field(default_factory=list)
    """The public JWKs (each with its ``kid``) its ``private_key_jwt`` assertions verify with."""

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_allowed_scope(self, scope: str) -> str:
        return " ".join(s for s in scope.split() if s in ("openid", "profile", "groups"))

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri == self.redirect_uri

    def check_client_secret(self, client_secret: str) -> bool:
        return secrets.compare_digest(client_secret, self.client_secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method == self.auth_method

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type == "authorization_code"


@dataclass
class Code:
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    user: str
    nonce: str | None
    code_challenge: str | None
    code_challenge_method: str | None
    auth_time: int = field(default_factory=lambda: int(time.time()))

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope

    def get_nonce(self) -> str | None:
        return self.nonce

    def get_auth_time(self) -> int:
        return self.auth_time

    def get_acr(self) -> None:
        return None

    def get_amr(self) -> None:
        return None


class OidcProvider:
    """``with OidcProvider(users, client_id=..., redirect_uri=...) as idp:``"""

    def __init__(
        self,
        users: dict[str, dict[str, Any]],
        *,
        client_id: str,
        redirect_uri: str,
        host: str = "127.0.0.1",
    ) -> None:
        self.users = users
        self.client = Client(client_id, secrets.token_urlsafe(24), redirect_uri)
        self.key = RSAKey.generate_key(2048, parameters={"kid": "k1", "use": "sig"})
        self.codes: dict[str, Code] = {}
        self.redeemed: list[str] = []
        self.id_token_seconds = 3600  # how long an ID token it signs is valid
        self.issued_exp: list[int] = []  # the exp of every ID token it signed, in order
        self.authenticated: list[str] = []  # the client's method at each accepted token request
        self.assertion_headers: list[dict[str, Any]] = []  # of each private_key_jwt assertion
        self.assertion_claims: list[dict[str, Any]] = []  # and its claims
        self._assertion_ids: set[str] = set()
        self._server = make_server("127.0.0.1", 0, self._app(), threaded=True)
        self.issuer = f"http://{host}:{self._server.server_port}"  # served on 127.0.0.1
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> OidcProvider:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._thread.join()

    def _app(self) -> Flask:
        provider = self
        app = Flask("oidc-test-provider")

        class CodeGrant(grants.AuthorizationCodeGrant):
            # every method is offered; the client accepts only its own
            TOKEN_ENDPOINT_AUTH_METHODS = AUTH_METHODS

            def authenticate_token_endpoint_client(self) -> Client:
                client: Client = super().authenticate_token_endpoint_client()
                provider.authenticated.append(self.request.auth_method)
                return client

            def save_authorization_code(self, code: str, req: Any) -> None:
                provider.codes[code] = Code(
                    code,
                    req.client.client_id,
                    req.payload.redirect_uri,
                    req.payload.scope,
                    req.user,
                    req.payload.data.get("nonce"),
                    req.payload.data.get("code_challenge"),
                    req.payload.data.get("code_challenge_method"),
                )

            def query_authorization_code(self, code: str, client: Client) -> Code | None:
                found = provider.codes.get(code)
                return found if found and found.client_id == client.client_id else None

            def delete_authorization_code(self, authorization_code: Code) -> None:
                provider.codes.pop(authorization_code.code, None)
                provider.redeemed.append(authorization_code.code)

            def authenticate_user(self, authorization_code: Code) -> str:
                return authorization_code.user

        class IdToken(OpenIDCode):
            def exists_nonce(self, nonce: str, req: Any) -> bool:
                return any(c.nonce == nonce for c in provider.codes.values())

            def resolve_client_private_key(self, client: Client) -> RSAKey:
                return provider.key

            def get_client_claims(self, client: Client) -> dict[str, Any]:
                exp = int(time.time()) + provider.id_token_seconds
                provider.issued_exp.append(exp)
                return {"iss": provider.issuer, "aud": [client.client_id], "exp": exp}

            def get_encode_header(self, client: Client) -> dict[str, str]:
                return {"alg": "RS256", "kid": "k1"}

            def generate_user_info(self, user: str, scope: str) -> UserInfo:
                return UserInfo(sub=user, **provider.users[user])

        class PrivateKeyJwt(JWTBearerClientAssertion):  # type: ignore[misc]
            CLIENT_AUTH_METHOD = "private_key_jwt"

            def get_audiences(self) -> list[str]:
                return [provider.issuer + "/token"]

            def validate_jti(self, claims: Any, jti: str) -> bool:
                if jti in provider._assertion_ids:
                    return False
                provider._assertion_ids.add(jti)
                return True

            def resolve_client_public_key(self, client: Client) -> KeySet:
                return KeySet.import_key_set({"keys": client.public_keys})

            def extract_assertion(self, assertion: str) -> Any:
                headers, claims = super().extract_assertion(assertion)
                provider.assertion_headers.append(dict(headers))
                provider.assertion_claims.append(dict(claims))
                return headers, claims

        def query_client(client_id: str) -> Client | None:
            return provider.client if client_id == provider.client.client_id else None

        server = AuthorizationServer(app, query_client=query_client, save_token=lambda t, r: None)
        server.register_client_auth_method("private_key_jwt", PrivateKeyJwt())
        server.register_grant(
            CodeGrant, [IdToken(require_nonce=True), CodeChallenge(required=True)]
        )

        @app.get("/.well-known/openid-configuration")
        def discovery() -> Any:
            return jsonify(
                issuer=provider.issuer,
                authorization_endpoint=provider.issuer + "/authorize",
                token_endpoint=provider.issuer + "/token",
                jwks_uri=provider.issuer + "/jwks",
                response_types_supported=["code"],
                subject_types_supported=["public"],
                id_token_signing_alg_values_supported=["RS256"],
                code_challenge_methods_supported=["S256"],
                token_endpoint_auth_methods_supported=[provider.client.auth_method],
            )

        @app.get("/jwks")
        def jwks() -> Any:
            return jsonify(keys=[provider.key.as_dict(private=False)])

        @app.route("/authorize", methods=["GET", "POST"])
        def authorize() -> Any:
            if request.method == "GET":
                server.get_consent_grant(end_user=None)  # validates the request first
                return '<form method="post"><input name="username"><button>Sign in</button></form>'
            user = request.form.get("username") or None
            grant = server.get_consent_grant(end_user=user)
            return server.create_authorization_response(grant_user=user, grant=grant)

        @app.post("/token")
        def token() -> Any:
            return server.create_token_response()

        return app
