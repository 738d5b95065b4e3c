"""Build a channel from its settings and run it: the HTTP app on uvicorn (a
thread of its own) and the outbox thread, until told to stop.

``ledger channels telegram serve`` and ``ledger channels slack serve`` are
this (``api/cli_channels.py`` owns the signals). Logging: one line per fact on
stderr (``ledger.channels.<name>``); the httpx and httpcore loggers are held
at WARNING because their INFO lines carry request URLs, and a Bot API URL
holds the bot token. Nothing logged holds a token, a secret or a preview.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import uvicorn
from fastapi import FastAPI

from channels.ledger import LedgerGateway
from channels.platform import Platform
from channels.sealing import Sealer
from channels.service import ChannelService
from channels.settings import ChannelSettings, SlackSettings, TelegramSettings
from channels.state import State
from channels.users import load_users
from channels.web import BodyLimit, create_app
from ledger_client import WebhookVerifier

Kind = Literal["telegram", "slack"]
START_SECONDS = 15.0
QUIET_LOGGERS = ("httpx", "httpcore", "uvicorn.access")


def configure_logging(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("ledger.channels")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


@dataclass
class Channel:
    """A built channel: its service (with the outbox) and its HTTP app."""

    service: ChannelService
    app: FastAPI
    platform: Platform
    ledger: LedgerGateway

    def close(self) -> None:
        self.service.stop()
        self.platform.close()
        self.ledger.close()
        self.service.state.close()


def build(
    kind: Kind, settings: ChannelSettings, *, clock: Callable[[], float] = time.time
) -> Channel:
    """Everything a channel needs, wired from its settings (nothing started)."""
    from channels.slack import routes as slack_routes
    from channels.slack.web_api import WebApi
    from channels.telegram import routes as telegram_routes
    from channels.telegram.bot_api import BotApi

    users = load_users(settings.users_file)
    platform: Platform
    if kind == "telegram":
        assert isinstance(settings, TelegramSettings)
        platform = BotApi(settings.api_base_url, settings.bot_token.get_secret_value())
    else:
        assert isinstance(settings, SlackSettings)
        platform = WebApi(settings.api_base_url, settings.bot_token.get_secret_value())
    ledger = LedgerGateway(settings.ledger_url, settings.ledger_token_now)
    service = ChannelService(
        platform,
        State(settings.state_path),
        Sealer(settings.state_key_bytes()),
        users,
        ledger,
        clock=clock,
    )
    if isinstance(settings, TelegramSettings):
        add = telegram_routes.routes(service, settings.webhook_secret.get_secret_value())
    else:
        assert isinstance(settings, SlackSettings)
        add = slack_routes.routes(service, settings.signing_secret.get_secret_value())
    verifier = WebhookVerifier(settings.ledger_webhook_secret.get_secret_value(), clock=clock)
    app = create_app(
        service,
        intake_token=settings.intake_token.get_secret_value(),
        webhook_verifier=verifier,
        title=f"execution ledger: {kind} channel",
        platform_routes=add,
    )
    return Channel(service, app, platform, ledger)


class Server:
    """uvicorn on a thread: ``start`` (True once it listens), ``stop``."""

    def __init__(self, app: FastAPI, host: str, port: int) -> None:
        config = uvicorn.Config(
            BodyLimit(app),
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            timeout_keep_alive=5,
            limit_concurrency=256,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="channel-http", daemon=True)

    def start(self) -> bool:
        self._thread.start()
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline and self._thread.is_alive():
            if self._server.started:
                return True
            time.sleep(0.02)
        return False

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout)
