"""The Telegram Bot API, as the channel uses it: documented payloads over httpx.

``sendMessage`` (plain text, never a parse mode, with an ``inline_keyboard``),
``editMessageText`` (the buttons go once the approval is decided),
``answerCallbackQuery`` and ``setWebhook`` (with ``secret_token``). A
method's URL holds the bot token (``<base>/bot<token>/<method>``), so no URL
is ever logged or put into an error: the httpx loggers are kept at WARNING
(``channels.runner``) and errors name the method and Telegram's code only.
"""

from __future__ import annotations

from typing import Any

import httpx

from channels.platform import Action, Message, PlatformError, Press, SentMessage

MAX_TEXT = 4096
MAX_CALLBACK_DATA_BYTES = 64
MAX_ANSWER_CHARS = 200
_CODES = {Action.APPROVE: "a", Action.DECLINE: "d"}
_ACTIONS = {code: action for action, code in _CODES.items()}
# Telegram's descriptions of an edit that can never succeed.
_GONE = ("message to edit not found", "message_id_invalid", "chat not found", "bot was blocked")


def callback_data(action: Action, reference: str) -> str:
    """``a.<reference>`` or ``d.<reference>``: 24 bytes, well inside Telegram's 64."""
    data = f"{_CODES[action]}.{reference}"
    if len(data.encode()) > MAX_CALLBACK_DATA_BYTES:
        raise ValueError("callback data over 64 bytes")
    return data


def parse_callback_data(data: Any) -> tuple[Action, str] | None:
    if not isinstance(data, str) or len(data) > MAX_CALLBACK_DATA_BYTES:
        return None
    code, dot, reference = data.partition(".")
    action = _ACTIONS.get(code)
    if action is None or not dot or not reference:
        return None
    return action, reference


def press_of(update: dict[str, Any]) -> Press | None:
    """The press in an update with a ``callback_query``; None for anything else."""
    query = update.get("callback_query")
    if not isinstance(query, dict):
        return None
    parsed = parse_callback_data(query.get("data"))
    sender = query.get("from")
    if parsed is None or not isinstance(sender, dict) or "id" not in sender:
        return None
    message = query.get("message")
    chat = message.get("chat") if isinstance(message, dict) else None
    conversation = str(chat["id"]) if isinstance(chat, dict) and "id" in chat else ""
    message_id = message.get("message_id") if isinstance(message, dict) else None
    action, reference = parsed
    return Press(
        reference=reference,
        action=action,
        user=str(sender["id"]),
        conversation=conversation,
        message_id=None if message_id is None else str(message_id),
        query=str(query.get("id", "")),
    )


class TelegramError(PlatformError):
    """The Bot API answered ``ok: false`` (or not at all)."""


class BotApi:
    """The Bot API of one bot."""

    name = "telegram"
    max_text = MAX_TEXT

    def __init__(
        self,
        base_url: str,
        bot_token: str,
        *,
        timeout: float = 10.0,
        http: httpx.Client | None = None,
    ) -> None:
        self._root = f"{base_url.rstrip('/')}/bot{bot_token}"
        self._http = http or httpx.Client(timeout=timeout)
        self._owns_http = http is None

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def call(self, method: str, payload: dict[str, Any]) -> Any:
        """One Bot API method: its ``result``, or :class:`TelegramError`."""
        try:
            response = self._http.post(f"{self._root}/{method}", json=payload)
        except httpx.TimeoutException:
            raise TelegramError(f"{method}: no answer in time") from None
        except httpx.TransportError as exc:
            raise TelegramError(f"{method}: {type(exc).__name__}") from None
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict) and body.get("ok") is True:
            return body.get("result")
        status = response.status_code
        if not isinstance(body, dict):
            raise TelegramError(f"{method}: HTTP {status}", retry_after=None)
        description = str(body.get("description", ""))[:200]
        parameters = body.get("parameters")
        retry_after = parameters.get("retry_after") if isinstance(parameters, dict) else None
        code = body.get("error_code", status)
        raise TelegramError(
            f"{method}: {code} {description}".strip(),
            retry_after=float(retry_after) if isinstance(retry_after, int | float) else None,
            permanent=code in (400, 403) and any(g in description.lower() for g in _GONE),
        )

    @staticmethod
    def markup(message: Message) -> dict[str, Any]:
        row = [
            {"text": b.label, "callback_data": callback_data(b.action, b.reference)}
            for b in message.buttons
        ]
        return {"inline_keyboard": [row] if row else []}

    def send(self, conversation: str, message: Message) -> SentMessage:
        result = self.call(
            "sendMessage",
            {"chat_id": conversation, "text": message.text, "reply_markup": self.markup(message)},
        )
        if not isinstance(result, dict) or "message_id" not in result:
            raise TelegramError("sendMessage: no message in the answer")
        chat = result.get("chat")
        where = str(chat["id"]) if isinstance(chat, dict) and "id" in chat else conversation
        return SentMessage(where, str(result["message_id"]))

    def edit(self, where: SentMessage, message: Message) -> None:
        try:
            self.call(
                "editMessageText",
                {
                    "chat_id": where.conversation,
                    "message_id": int(where.message_id),
                    "text": message.text,
                    "reply_markup": self.markup(message),
                },
            )
        except TelegramError as exc:
            if "message is not modified" in str(exc):
                return  # it already shows this: done
            raise

    def answer(self, press: Press, text: str) -> None:
        if not press.query:
            return
        self.call(
            "answerCallbackQuery",
            {"callback_query_id": press.query, "text": text[:MAX_ANSWER_CHARS]},
        )

    def set_webhook(self, url: str, secret_token: str) -> None:
        """Register where Telegram sends updates (only callback queries: the bot
        reads no chat messages), with the secret it sends back on each one."""
        self.call(
            "setWebhook",
            {"url": url, "secret_token": secret_token, "allowed_updates": ["callback_query"]},
        )
