"""What ``api.http.slow_clients`` takes from uvicorn beyond its public settings,
pinned so that an upgrade that moves it fails here, by name, instead of in
production: the class ``--http h11`` names, built with keyword arguments, and
uvicorn's ``http`` setting taking a protocol class of ours."""

from __future__ import annotations

import asyncio
import inspect

import uvicorn
from uvicorn.config import HTTP_PROTOCOLS

from api.http.slow_clients import GuardedProtocol, UvicornH11, guarded_protocol


async def app(scope: object, receive: object, send: object) -> None:  # pragma: no cover
    raise AssertionError("not called")


def test_the_wrapped_class_is_the_one_uvicorn_runs_for_h11() -> None:
    module, _, name = HTTP_PROTOCOLS["h11"].partition(":")
    assert (UvicornH11.__module__, UvicornH11.__name__) == (module, name)
    assert issubclass(UvicornH11, asyncio.Protocol)


def test_uvicorn_builds_the_protocol_from_the_keywords_the_wrapper_passes_on() -> None:
    parameters = inspect.signature(UvicornH11).parameters
    assert {"config", "server_state", "app_state"} <= parameters.keys()
    assert all(
        p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        for name, p in parameters.items()
        if name in {"config", "server_state", "app_state"}
    )
    source = inspect.getsource(uvicorn.Server)
    for keyword in ("config=config", "server_state=", "app_state="):
        assert keyword in source, f"uvicorn.Server no longer builds protocols with {keyword}"


def test_uvicorns_http_setting_takes_the_guarded_class() -> None:
    bound = guarded_protocol(header_timeout=1, body_timeout=2, max_connections=3)
    config = uvicorn.Config(app, http=bound)
    config.load()
    assert config.http_protocol_class is bound
    assert issubclass(bound, GuardedProtocol)
    assert (bound.header_timeout, bound.body_timeout, bound.max_connections) == (1, 2, 3)
    # each bound class counts its own connections
    assert bound.connections is not GuardedProtocol.connections
