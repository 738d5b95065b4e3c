"""A channel's settings: environment variables with one prefix per channel.

``TELEGRAM_*`` for the Telegram channel, ``SLACK_*`` for the Slack channel,
so both can be configured side by side. What every channel needs
(:class:`ChannelSettings`): where the ledger is and the token it acts with,
the ledger webhooks' signing secret, the intake token the proposer presents
with, the state file and its key, the users file. Each platform adds its API
base URL and its own secrets. Secrets are ``SecretStr``: no repr, log line or
error message shows them. :func:`load` turns every problem into one line
naming the variable.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from channels.sealing import parse_key

MIN_SECRET_CHARS = 32
_TELEGRAM_SECRET = re.compile(r"[A-Za-z0-9_-]{1,256}")

S = TypeVar("S", bound=BaseSettings)


class ChannelSettingsError(Exception):
    """The settings are invalid; the message names the variable, never a secret value."""


def _url(value: str, name: str) -> str:
    value = value.rstrip("/")
    if not re.fullmatch(r"https?://[A-Za-z0-9.\-\[\]:]+(/[^\s?#]*)?", value):
        raise ValueError(f"{name}: an http(s) URL without query or fragment")
    return value


class ChannelSettings(BaseSettings):
    """What every channel service needs."""

    model_config = SettingsConfigDict(frozen=True, extra="ignore")

    ledger_url: str = Field(description="The ledger's base URL (http://host:port).")
    ledger_token: SecretStr | None = Field(
        default=None, description="The channel service's bearer token for the ledger."
    )
    ledger_token_file: Path | None = Field(
        default=None, description="Or a file holding it, read again on every request."
    )
    ledger_webhook_secret: SecretStr = Field(
        description="The signing secret of the ledger's [[webhook]] subscription to this channel."
    )
    intake_token: SecretStr = Field(
        description="The bearer token a proposer sends with POST /presentations."
    )
    state_key: SecretStr = Field(
        description="32 bytes (64 hex or base64) sealing the tokens in the state file."
    )
    state_path: Path = Field(default=Path("var/channel.db"), description="The state file.")
    users_file: Path = Field(description="Identity and channel bindings to platform ids (TOML).")

    @field_validator("ledger_url")
    @classmethod
    def _check_ledger_url(cls, value: str) -> str:
        return _url(value, "must be")

    @field_validator("intake_token", "ledger_webhook_secret")
    @classmethod
    def _check_secret_length(cls, value: SecretStr) -> SecretStr:
        if len(value.get_secret_value()) < MIN_SECRET_CHARS:
            raise ValueError(f"at least {MIN_SECRET_CHARS} characters")
        return value

    @field_validator("state_key")
    @classmethod
    def _check_state_key(cls, value: SecretStr) -> SecretStr:
        parse_key(value.get_secret_value())
        return value

    @model_validator(mode="after")
    def _one_ledger_token(self) -> ChannelSettings:
        if (self.ledger_token is None) == (self.ledger_token_file is None):
            raise ValueError("set exactly one of LEDGER_TOKEN and LEDGER_TOKEN_FILE")
        return self

    def state_key_bytes(self) -> bytes:
        return parse_key(self.state_key.get_secret_value())

    def ledger_token_now(self) -> str:
        """The token to send now (the file is read again each time: a rotated token works)."""
        if self.ledger_token is not None:
            return self.ledger_token.get_secret_value()
        assert self.ledger_token_file is not None
        return self.ledger_token_file.read_text(encoding="utf-8").strip()


class TelegramBotSettings(BaseSettings):
    """The bot alone (what ``ledger channels telegram set-webhook`` needs)."""

    model_config = SettingsConfigDict(env_prefix="TELEGRAM_", frozen=True, extra="ignore")

    bot_token: SecretStr = Field(description="The bot's token from @BotFather.")
    webhook_secret: SecretStr = Field(
        description="setWebhook's secret_token: Telegram sends it back on every update."
    )
    api_base_url: str = Field(default="https://api.telegram.org", description="The Bot API.")

    @field_validator("api_base_url")
    @classmethod
    def _check_api(cls, value: str) -> str:
        return _url(value, "must be")

    @field_validator("webhook_secret")
    @classmethod
    def _check_webhook_secret(cls, value: SecretStr) -> SecretStr:
        if not _TELEGRAM_SECRET.fullmatch(value.get_secret_value()):
            raise ValueError("1-256 characters of A-Z, a-z, 0-9, _ and - (Telegram's rule)")
        if len(value.get_secret_value()) < MIN_SECRET_CHARS:
            raise ValueError(f"at least {MIN_SECRET_CHARS} characters")
        return value


class TelegramSettings(ChannelSettings, TelegramBotSettings):
    """The Telegram channel (``TELEGRAM_*``)."""

    model_config = SettingsConfigDict(env_prefix="TELEGRAM_", frozen=True, extra="ignore")

    state_path: Path = Path("var/telegram-channel.db")


class SlackSettings(ChannelSettings):
    """The Slack channel (``SLACK_*``)."""

    model_config = SettingsConfigDict(env_prefix="SLACK_", frozen=True, extra="ignore")

    bot_token: SecretStr = Field(description="The app's bot token (xoxb-...).")
    signing_secret: SecretStr = Field(description="The app's signing secret.")
    api_base_url: str = Field(default="https://slack.com/api", description="The Web API.")
    state_path: Path = Path("var/slack-channel.db")

    @field_validator("api_base_url")
    @classmethod
    def _check_api(cls, value: str) -> str:
        return _url(value, "must be")


def load(cls: type[S], **overrides: Any) -> S:
    """The settings from the environment (and ``overrides``), or one clear error."""
    prefix = str(cls.model_config.get("env_prefix", ""))
    try:
        return cls(**overrides)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_input=False, include_url=False):
            loc = "_".join(str(p) for p in err["loc"]).upper()
            message = err["msg"].removeprefix("Value error, ")
            if loc:
                problems.append(f"{prefix}{loc}: {message}")
            else:  # a check across fields names its variables itself
                problems.append(message.replace("LEDGER_TOKEN", f"{prefix}LEDGER_TOKEN"))
        raise ChannelSettingsError("invalid settings: " + "; ".join(problems)) from None
