"""``ledger channels``: the Telegram and Slack channel services.

Each runs as a process of its own next to the ledger and talks to it only
through its public HTTP API (the Python client), as a channel service for
its own channel (README "Approve in Telegram" and "Approve in Slack",
docs/channels.md). The code lives in the ``channels`` package; this module
only reads the settings, owns the signals and prints one line on error.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from api.cli_common import fail, one_line_errors, start_up_over
from api.signals import StopSignals

channels_app = typer.Typer(
    help="Chat channels: approve in Telegram or Slack, on the ledger's public API.",
    no_args_is_help=True,
)
telegram_app = typer.Typer(help="The Telegram channel (TELEGRAM_* settings).", no_args_is_help=True)
slack_app = typer.Typer(help="The Slack channel (SLACK_* settings).", no_args_is_help=True)
channels_app.add_typer(telegram_app, name="telegram")
channels_app.add_typer(slack_app, name="slack")

MISSING = (
    "the channels need the Python client and slack-sdk: "
    "pip install ./clients/python 'execution-ledger[channels]' (make install has both)"
)
Host = Annotated[str, typer.Option(help="Interface to listen on.")]
Port = Annotated[int, typer.Option(min=1, max=65535, help="TCP port.")]


def _modules() -> Any:
    try:
        from channels import runner, settings
    except ImportError:
        fail(MISSING)
    return runner, settings


def _serve(kind: str, host: str, port: int) -> None:
    runner, settings = _modules()
    with one_line_errors():
        from channels.users import UsersFileError

        cls = settings.TelegramSettings if kind == "telegram" else settings.SlackSettings
        try:
            loaded = settings.load(cls)
            runner.configure_logging()
            channel = runner.build(kind, loaded)
        except (settings.ChannelSettingsError, UsersFileError) as exc:
            fail(str(exc))
        server = runner.Server(channel.app, host, port)
        try:
            with StopSignals() as stopping:
                channel.service.start()
                if not server.start():
                    fail(f"cannot listen on {host}:{port}")
                start_up_over()
                path = "/telegram/updates" if kind == "telegram" else "/slack/actions"
                typer.echo(
                    f"{kind} channel on http://{host}:{port} ({kind} at {path}, intake at "
                    "/presentations, ledger webhooks at /ledger/events)"
                )
                stopping.wait(alive=lambda: server.running)
        finally:
            server.stop()
            channel.close()


@telegram_app.command("serve")
def telegram_serve(host: Host = "127.0.0.1", port: Port = 8010) -> None:
    """Run the Telegram channel: the updates webhook, the intake and the ledger's webhooks.

    SIGTERM or Ctrl-C stops it; what a message should still show is in its
    state file and is shown after the next start."""
    _serve("telegram", host, port)


@telegram_app.command("set-webhook")
def telegram_set_webhook(
    url: Annotated[str, typer.Argument(help="Where Telegram sends updates: .../telegram/updates")],
) -> None:
    """Register the updates URL with Telegram (setWebhook), with TELEGRAM_WEBHOOK_SECRET as
    its secret_token. Needs only TELEGRAM_BOT_TOKEN, TELEGRAM_WEBHOOK_SECRET and
    TELEGRAM_API_BASE_URL."""
    _, settings = _modules()
    with one_line_errors():
        from channels.telegram.bot_api import BotApi, TelegramError

        try:
            bot = settings.load(settings.TelegramBotSettings)
        except settings.ChannelSettingsError as exc:
            fail(str(exc))
        if not url.startswith(("https://", "http://")):
            fail("the URL must be http(s)://... (Telegram itself takes https only)")
        api = BotApi(bot.api_base_url, bot.bot_token.get_secret_value())
        try:
            api.set_webhook(url, bot.webhook_secret.get_secret_value())
        except TelegramError as exc:
            fail(f"Telegram refused setWebhook: {exc}")
        finally:
            api.close()
        typer.echo(f"updates go to {url}")


@slack_app.command("serve")
def slack_serve(host: Host = "127.0.0.1", port: Port = 8011) -> None:
    """Run the Slack channel: the interactivity endpoint, the intake and the ledger's webhooks.

    SIGTERM or Ctrl-C stops it; what a message should still show is in its
    state file and is shown after the next start."""
    _serve("slack", host, port)
