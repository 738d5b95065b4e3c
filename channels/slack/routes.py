"""``POST /slack/actions``: the app's interactivity Request URL.

Every request is checked with slack-sdk's ``SignatureVerifier``: the v0
HMAC-SHA256 of ``v0:<timestamp>:<body>`` under the signing secret, with the
timestamp within five minutes of now. Anything else gets 401 and changes
nothing. A request whose signature was already handled is a replay (within
the five minutes): 200 and nothing else. A press is decided and answered
(an ephemeral message to the presser) before the 200 Slack waits for.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qs

from fastapi import FastAPI, Request
from fastapi.responses import Response
from slack_sdk.signature import Clock, SignatureVerifier
from starlette.concurrency import run_in_threadpool

from channels.service import ChannelService
from channels.slack.web_api import press_of
from channels.web import error

PATH = "/slack/actions"


class ServiceClock(Clock):
    """The service's clock, for the verifier's five-minute window."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now

    def now(self) -> float:
        return self._now()


def verifier(signing_secret: str, now: Callable[[], float]) -> SignatureVerifier:
    return SignatureVerifier(signing_secret, clock=ServiceClock(now))


def is_signed(check: SignatureVerifier, body: bytes, headers: Mapping[str, str]) -> bool:
    try:
        return check.is_valid_request(body, dict(headers))
    except ValueError:  # a timestamp that is not a number
        return False


def payload_of(body: bytes) -> dict[str, Any] | None:
    """The JSON ``payload`` field of a form-encoded interaction request."""
    try:
        fields = parse_qs(body.decode("utf-8"), strict_parsing=True)
        payload = json.loads(fields["payload"][0])
    except (ValueError, KeyError, IndexError):
        return None
    return payload if isinstance(payload, dict) else None


def handle_action(service: ChannelService, signature: str, body: bytes) -> str:
    key = f"slack-signature:{signature}"
    if not service.state.claim_seen(key, service.clock()):
        service.log.info("a signed request again: a replay, ignored")
        return "replay"
    payload = payload_of(body)
    press = press_of(payload) if payload is not None else None
    if press is None:
        return "ignored"
    try:
        service.press(press)
    except BaseException:
        service.state.forget_seen(key)
        raise
    return "pressed"


def routes(service: ChannelService, signing_secret: str) -> Callable[[FastAPI], None]:
    check = verifier(signing_secret, service.clock)

    def add(app: FastAPI) -> None:
        @app.post(PATH)
        async def actions(request: Request) -> Response:
            body = await request.body()
            if not is_signed(check, body, request.headers):
                return error(401, "unauthenticated", "Not signed by Slack.")
            signature = request.headers.get("x-slack-signature", "")
            await run_in_threadpool(handle_action, service, signature, body)
            return Response(status_code=200)

    return add
