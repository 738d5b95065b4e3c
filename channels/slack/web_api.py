"""Slack's Web API, as the channel uses it: documented JSON payloads over httpx.

``chat.postMessage`` with Block Kit (the preview as ``plain_text``, so nothing
in it is read as markup or a mention; an ``actions`` block with the two
buttons, whose ``value`` is the presentation's reference), ``chat.update``
(the buttons go once decided) and ``chat.postEphemeral`` (the answer to a
press, seen by the presser only). The bot token travels in the
``Authorization`` header only.
"""

from __future__ import annotations

from typing import Any

import httpx

from channels.outcomes import STATUS_LINE_ROOM
from channels.platform import Action, Message, PlatformError, Press, SentMessage

MAX_SECTION_TEXT = 3000
"""Slack's limit on a section block's text: the preview must fit in one."""
BLOCK_ID = "ledger_approval"
_GONE = ("message_not_found", "channel_not_found", "cant_update_message", "is_archived")


def blocks(message: Message) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = [
        {
            "type": "section",
            "text": {"type": "plain_text", "text": message.preview or message.text},
        },
    ]
    if message.status:
        found.append(
            {"type": "context", "elements": [{"type": "plain_text", "text": message.status}]}
        )
    if message.buttons:
        found.append(
            {
                "type": "actions",
                "block_id": BLOCK_ID,
                "elements": [
                    {
                        "type": "button",
                        "action_id": b.action.value,
                        "text": {"type": "plain_text", "text": b.label},
                        "style": "primary" if b.action is Action.APPROVE else "danger",
                        "value": b.reference,
                    }
                    for b in message.buttons
                ],
            }
        )
    return found


def press_of(payload: dict[str, Any]) -> Press | None:
    """The press in a ``block_actions`` interaction payload; None for anything else."""
    if payload.get("type") != "block_actions":
        return None
    user = payload.get("user")
    actions = payload.get("actions")
    if not isinstance(user, dict) or not isinstance(actions, list):
        return None
    chosen = next(
        (
            a
            for a in actions
            if isinstance(a, dict)
            and a.get("action_id") in (Action.APPROVE.value, Action.DECLINE.value)
            and isinstance(a.get("value"), str)
        ),
        None,
    )
    if chosen is None or not isinstance(user.get("id"), str):
        return None
    channel = payload.get("channel")
    container = payload.get("container")
    conversation = ""
    message_ts = None
    if isinstance(container, dict):
        conversation = str(container.get("channel_id") or "")
        message_ts = container.get("message_ts")
    if isinstance(channel, dict) and isinstance(channel.get("id"), str):
        conversation = channel["id"]
    return Press(
        reference=chosen["value"],
        action=Action(chosen["action_id"]),
        user=user["id"],
        conversation=conversation,
        message_id=message_ts if isinstance(message_ts, str) else None,
    )


class SlackError(PlatformError):
    """The Web API answered ``ok: false`` (or not at all)."""


class WebApi:
    """Slack's Web API for one app's bot token."""

    name = "slack"
    max_text = MAX_SECTION_TEXT + STATUS_LINE_ROOM

    def __init__(
        self,
        base_url: str,
        bot_token: str,
        *,
        timeout: float = 10.0,
        http: httpx.Client | None = None,
    ) -> None:
        self._root = base_url.rstrip("/")
        self._headers = {
            "Authorization": f"Bearer {bot_token}",
            "Content-Type": "application/json; charset=utf-8",
        }
        self._http = http or httpx.Client(timeout=timeout)
        self._owns_http = http is None

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        """One Web API method's answer, or :class:`SlackError`."""
        try:
            response = self._http.post(
                f"{self._root}/{method}", json=payload, headers=self._headers
            )
        except httpx.TimeoutException:
            raise SlackError(f"{method}: no answer in time") from None
        except httpx.TransportError as exc:
            raise SlackError(f"{method}: {type(exc).__name__}") from None
        if response.status_code == 429:
            after = response.headers.get("retry-after", "")
            raise SlackError(
                f"{method}: rate limited", retry_after=float(after) if after.isdigit() else None
            )
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise SlackError(f"{method}: HTTP {response.status_code}")
        if body.get("ok") is True:
            return body
        code = str(body.get("error", "unknown_error"))[:100]
        raise SlackError(f"{method}: {code}", permanent=code in _GONE)

    def send(self, conversation: str, message: Message) -> SentMessage:
        body = self.call(
            "chat.postMessage",
            {"channel": conversation, "text": message.text, "blocks": blocks(message)},
        )
        channel, ts = body.get("channel"), body.get("ts")
        if not isinstance(channel, str) or not isinstance(ts, str):
            raise SlackError("chat.postMessage: no channel and ts in the answer")
        return SentMessage(channel, ts)

    def edit(self, where: SentMessage, message: Message) -> None:
        self.call(
            "chat.update",
            {
                "channel": where.conversation,
                "ts": where.message_id,
                "text": message.text,
                "blocks": blocks(message),
            },
        )

    def answer(self, press: Press, text: str) -> None:
        self.call(
            "chat.postEphemeral", {"channel": press.conversation, "user": press.user, "text": text}
        )
