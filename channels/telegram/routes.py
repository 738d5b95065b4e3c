"""``POST /telegram/updates``: where Telegram sends the bot's updates (setWebhook).

Telegram does not sign updates: it sends back the ``secret_token`` given to
``setWebhook`` in ``X-Telegram-Bot-Api-Secret-Token``. A request without
exactly that value (compared in constant time) is refused with 401 and
changes nothing. An update id already handled is a replay: 200 and nothing
else (Telegram retries an update until it gets a 2xx). A callback query is
decided and answered (``answerCallbackQuery``) before the 200.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from channels.service import ChannelService
from channels.telegram.bot_api import press_of
from channels.web import error

SECRET_HEADER = "x-telegram-bot-api-secret-token"
PATH = "/telegram/updates"


def handle_update(service: ChannelService, update: dict[str, Any]) -> str:
    """Handle one authenticated update; what was done (for tests and logs)."""
    update_id = update.get("update_id")
    if not isinstance(update_id, int) or isinstance(update_id, bool):
        return "ignored"
    key = f"telegram-update:{update_id}"
    if not service.state.claim_seen(key, service.clock()):
        service.log.info("update %d again: a replay, ignored", update_id)
        return "replay"
    press = press_of(update)
    if press is None:
        return "ignored"
    try:
        service.press(press)
    except BaseException:
        service.state.forget_seen(key)  # so Telegram's retry is handled
        raise
    return "pressed"


def routes(service: ChannelService, webhook_secret: str) -> Callable[[FastAPI], None]:
    expected = webhook_secret.encode()

    def add(app: FastAPI) -> None:
        @app.post(PATH)
        async def updates(request: Request) -> Response:
            offered = request.headers.get(SECRET_HEADER, "").encode()
            if not hmac.compare_digest(offered, expected):
                return error(401, "unauthenticated", "Not from Telegram.")
            try:
                update = json.loads(await request.body())
            except ValueError:
                return error(400, "invalid_input", "The update is not JSON.")
            if not isinstance(update, dict):
                return error(400, "invalid_input", "The update is not a JSON object.")
            await run_in_threadpool(handle_update, service, update)
            return Response(status_code=200)

    return add
