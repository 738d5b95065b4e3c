"""Serving the MCP server: stdio for a client that starts ``ledger mcp`` itself,
streamable HTTP (at ``/mcp``) for clients that connect with a bearer token."""

from __future__ import annotations

import hashlib
from typing import Any

import anyio
from anyio import to_thread

from api.http.auth import TokenVerifier
from api.service.principal import Role
from domain.errors import Unauthenticated

MCP_PATH = "/mcp"


class ProposerTokens:
    """The SDK's ``TokenVerifier`` over the ledger's own: a token is let in exactly
    when the HTTP API would accept it; its role becomes the one scope, and the
    route requires ``proposer``."""

    def __init__(self, verifier: TokenVerifier) -> None:
        self.verifier = verifier

    async def verify_token(self, token: str) -> Any:
        from mcp.server.auth.provider import AccessToken

        try:
            caller = self.verifier.verify_cached(token)
            if caller is None:  # the identity provider's keys must be fetched first
                caller = await to_thread.run_sync(self.verifier.verify, token)
        except Unauthenticated:
            return None
        return AccessToken(
            # only a digest is kept on the request: the token itself never sits in a log's reach
            token="sha256:" + hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest(),
            client_id=caller.subject,
            subject=caller.subject,
            scopes=[caller.role.value],
            claims={"role": caller.role.value},
        )


def http_app(server: Any, verifier: TokenVerifier, *, host: str, port: int) -> Any:
    """The streamable HTTP app (a Starlette app) with proposer-only bearer auth."""
    from mcp.server.auth.settings import AuthSettings

    auth = AuthSettings(
        issuer_url=f"http://{'localhost' if host in ('127.0.0.1', '::1') else host}:{port}",
        resource_server_url=None,
        required_scopes=[Role.PROPOSER.value],
    )
    return server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=host,
        auth=auth,
        token_verifier=ProposerTokens(verifier),
    )


def serve_stdio(server: Any) -> None:
    """Serve one client on this process's stdin and stdout until it closes them."""
    from mcp.server.stdio import stdio_server

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)
