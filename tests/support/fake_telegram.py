"""A fake Telegram on loopback: the Bot API methods the channel uses, with the
documented request and answer shapes, and the users who press its buttons.

Bot API (``POST /bot<token>/<method>``, JSON or form-encoded parameters; every
answer is ``{"ok": true, "result": ...}`` or ``{"ok": false, "error_code",
"description"[, "parameters": {"retry_after"}]}``):

- ``sendMessage`` (``chat_id``, ``text`` 1-4096 characters, ``reply_markup``
  with an ``inline_keyboard`` whose ``callback_data`` is 1-64 bytes) answers
  the Message (``message_id``, ``chat``, ``date``, ``text``, ``reply_markup``);
  an unknown chat is ``400 Bad Request: chat not found``;
- ``editMessageText`` (``chat_id``, ``message_id``, ``text``, ``reply_markup``)
  answers the edited Message; ``400 ... message to edit not found`` and
  ``400 ... message is not modified`` as Telegram says them;
- ``answerCallbackQuery`` (``callback_query_id``, ``text`` up to 200) answers
  ``true``; a query id it did not issue, or already answered, is ``400 ...
  query is too old and response timeout expired or query ID is invalid``;
- ``setWebhook`` (``url``, ``secret_token`` of ``[A-Za-z0-9_-]{1,256}``,
  ``allowed_updates``) answers ``true``; ``getWebhookInfo``.

A wrong bot token is ``401 Unauthorized``. ``fail`` makes a method answer
``502 Bad Gateway`` for a while (an outage), ``hold`` keeps its answers until
released (a request in flight when a process dies).

A user's press (:meth:`FakeTelegram.press`) is what Telegram does: an
``Update`` with a ``callback_query`` (``id``, ``from``, ``message``,
``chat_instance``, ``data``) POSTed to the registered webhook with the
``X-Telegram-Bot-Api-Secret-Token`` header.

Run alone (the README does): ``python -m tests.support.fake_telegram --port P
--token-env NAME --chat 1001 --log FILE``; then ``POST /_fake/press``
``{"chat_id", "user_id", "button"}`` presses the last message's button, and
``GET /_fake/chats/<chat_id>`` shows the messages. ``--log`` gets one JSON
line per request made to it and per update it sent.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx

from tests.support.http_server import (
    append_json_line,
    reply_json,
    serve_on_loopback,
    serve_until_signalled,
)

MAX_TEXT = 4096
MAX_CALLBACK_DATA = 64
SECRET_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,256}")
TOO_OLD = "Bad Request: query is too old and response timeout expired or query ID is invalid"
NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup "
    "are exactly the same as a current content and reply markup of the message"
)


@dataclass
class FakeMessage:
    message_id: int
    chat_id: int
    text: str
    reply_markup: dict[str, Any] | None
    edits: int = 0

    def buttons(self) -> list[dict[str, Any]]:
        rows = (self.reply_markup or {}).get("inline_keyboard") or []
        return [button for row in rows for button in row]

    def as_result(self) -> dict[str, Any]:
        result: dict[str, Any] = {
            "message_id": self.message_id,
            "from": {"id": 999, "is_bot": True, "first_name": "Ledger", "username": "ledger_bot"},
            "chat": {"id": self.chat_id, "type": "private"},
            "date": int(time.time()),
            "text": self.text,
        }
        if self.buttons():
            result["reply_markup"] = self.reply_markup
        if self.edits:
            result["edit_date"] = int(time.time())
        return result


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    status: int
    answer: dict[str, Any]


class _Refusal(Exception):
    def __init__(self, code: int, description: str) -> None:
        self.code, self.description = code, description


@dataclass
class FakeTelegram:
    """The fake Bot API of one bot, its chats and its webhook."""

    token: str
    chats: set[int] = field(default_factory=set)
    log_path: Path | None = None

    def __post_init__(self) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.calls: list[Call] = []
        self.updates_sent: list[dict[str, Any]] = []
        self.messages: dict[tuple[int, int], FakeMessage] = {}
        self.answers: dict[str, str] = {}
        self.issued_queries: set[str] = set()
        self.webhook_url: str | None = None
        self.webhook_secret: str | None = None
        self.failing: dict[str, int] = {}
        self.holding: dict[str, threading.Event] = {}
        self._message_ids = itertools.count(1)
        self._update_ids = itertools.count(700_000)
        self._query_ids = itertools.count(5_000_000_000)
        self.server: ThreadingHTTPServer | None = None

    # -- running ------------------------------------------------------------------------

    def start(self, port: int = 0) -> FakeTelegram:
        self.server = serve_on_loopback(self._handle, port)
        return self

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        for held in list(self.holding.values()):
            held.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    # -- behaviour ----------------------------------------------------------------------

    def fail(self, method: str, times: int = 1_000_000) -> None:
        """``method`` answers 502 for its next ``times`` calls."""
        with self.lock:
            self.failing[method] = times

    def recover(self, method: str) -> None:
        with self.lock:
            self.failing.pop(method, None)

    def hold(self, method: str) -> threading.Event:
        """``method``'s answers wait until the returned event is set."""
        with self.lock:
            self.holding[method] = threading.Event()
            return self.holding[method]

    # -- what it saw --------------------------------------------------------------------

    def calls_of(self, method: str) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.method == method]

    def chat(self, chat_id: int) -> list[FakeMessage]:
        with self.lock:
            return [m for (c, _), m in sorted(self.messages.items()) if c == chat_id]

    def wait_for(self, condition: Any, timeout: float = 30.0, what: str = "a change") -> Any:
        """Block until ``condition()`` is truthy (checked on every request it gets)."""
        with self.changed:
            found = self.changed.wait_for(condition, timeout=timeout)
        if not found:
            raise AssertionError(f"fake Telegram: timed out waiting for {what}")
        return found

    def everything_sent_to_it(self) -> str:
        """Every request it got and every update it sent, as text (for redaction
        checks), but setWebhook's: its secret_token is meant for Telegram."""
        with self.lock:
            params = [c.params for c in self.calls if c.method != "setWebhook"]
            return json.dumps(params + self.updates_sent)

    # -- a user ------------------------------------------------------------------------

    def update_for_press(
        self, chat_id: int, user_id: int, message_id: int, data: str
    ) -> dict[str, Any]:
        """The Update Telegram sends when ``user_id`` presses the button with ``data``."""
        with self.lock:
            query_id = str(next(self._query_ids))
            self.issued_queries.add(query_id)
            message = self.messages.get((chat_id, message_id))
            text = message.text if message else ""
            return {
                "update_id": next(self._update_ids),
                "callback_query": {
                    "id": query_id,
                    "from": {"id": user_id, "is_bot": False, "first_name": f"user{user_id}"},
                    "message": {
                        "message_id": message_id,
                        "from": {"id": 999, "is_bot": True, "first_name": "Ledger"},
                        "chat": {"id": chat_id, "type": "private"},
                        "date": int(time.time()),
                        "text": text,
                    },
                    "chat_instance": str(-chat_id),
                    "data": data,
                },
            }

    def deliver(self, update: dict[str, Any], *, secret: str | None = None) -> int:
        """POST an update to the webhook as Telegram does; the HTTP status it got."""
        assert self.webhook_url is not None, "no webhook registered (setWebhook)"
        header = self.webhook_secret if secret is None else secret
        headers = {"X-Telegram-Bot-Api-Secret-Token": header} if header else {}
        with self.lock:
            self.updates_sent.append(update)
        self._log({"update": update})
        response = httpx.post(self.webhook_url, json=update, headers=headers, timeout=30)
        return response.status_code

    def press(
        self, chat_id: int, user_id: int, button: str = "Approve", message_id: int | None = None
    ) -> tuple[int, str | None]:
        """``user_id`` presses ``button`` under the chat's last message with buttons (or
        ``message_id``): the webhook's status and the answer shown to the user."""
        message = self._message_with_buttons(chat_id, message_id)
        data = next(b["callback_data"] for b in message.buttons() if b["text"] == button)
        update = self.update_for_press(chat_id, user_id, message.message_id, data)
        status = self.deliver(update)
        with self.lock:
            return status, self.answers.get(update["callback_query"]["id"])

    def _message_with_buttons(self, chat_id: int, message_id: int | None) -> FakeMessage:
        with self.lock:
            if message_id is not None:
                return self.messages[(chat_id, message_id)]
            with_buttons = [m for m in self.chat(chat_id) if m.buttons()]
            if not with_buttons:
                raise AssertionError(f"no message with buttons in chat {chat_id}")
            return with_buttons[-1]

    # -- the Bot API --------------------------------------------------------------------

    def _handle(self, request: BaseHTTPRequestHandler, verb: str) -> None:
        length = int(request.headers.get("content-length") or 0)
        raw = request.rfile.read(length) if length else b""
        if request.path.startswith("/_fake/"):
            status, body = self._control(verb, request.path, raw)
            reply_json(request, status, body)
            return
        match = re.fullmatch(r"/bot([^/]+)/([A-Za-z]+)", request.path.split("?")[0])
        params = self._params(request.headers.get("content-type", ""), raw)
        if match is None:
            reply_json(request, 404, {"ok": False, "error_code": 404, "description": "Not Found"})
            return
        token, method = match.groups()
        if method in self.holding:
            self.holding[method].wait(60)
        if token != self.token:
            status, answer = 401, {"ok": False, "error_code": 401, "description": "Unauthorized"}
        else:
            status, answer = self._method(method, params)
        with self.changed:
            self.calls.append(Call(method, params, status, answer))
            self.changed.notify_all()
        self._log({"method": method, "params": params, "status": status})
        reply_json(request, status, answer)

    @staticmethod
    def _params(content_type: str, raw: bytes) -> dict[str, Any]:
        if not raw:
            return {}
        if content_type.startswith("application/json"):
            loaded = json.loads(raw)
            return loaded if isinstance(loaded, dict) else {}
        fields = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
        if "reply_markup" in fields:
            fields["reply_markup"] = json.loads(fields["reply_markup"])
        return fields

    def _method(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            left = self.failing.get(method, 0)
            if left > 0:
                self.failing[method] = left - 1
                return 502, {"ok": False, "error_code": 502, "description": "Bad Gateway"}
            handler = {
                "sendMessage": self._send_message,
                "editMessageText": self._edit_message_text,
                "answerCallbackQuery": self._answer_callback_query,
                "setWebhook": self._set_webhook,
                "getWebhookInfo": self._get_webhook_info,
            }.get(method)
            if handler is None:
                return 404, {"ok": False, "error_code": 404, "description": "Not Found"}
            try:
                return 200, {"ok": True, "result": handler(params)}
            except _Refusal as refusal:
                return refusal.code, {
                    "ok": False,
                    "error_code": refusal.code,
                    "description": refusal.description,
                }

    @staticmethod
    def _check_markup(markup: Any) -> dict[str, Any] | None:
        if markup is None:
            return None
        rows = markup.get("inline_keyboard") if isinstance(markup, dict) else None
        if not isinstance(rows, list):
            raise _Refusal(400, "Bad Request: can't parse reply keyboard markup JSON object")
        for row in rows:
            for button in row:
                data = button.get("callback_data", "")
                if not button.get("text") or not 1 <= len(data.encode()) <= MAX_CALLBACK_DATA:
                    raise _Refusal(400, "Bad Request: BUTTON_DATA_INVALID")
        return dict(markup)

    @staticmethod
    def _text(params: dict[str, Any]) -> str:
        text = params.get("text")
        if not isinstance(text, str) or not text.strip():
            raise _Refusal(400, "Bad Request: message text is empty")
        if len(text) > MAX_TEXT:
            raise _Refusal(400, "Bad Request: message is too long")
        return text

    def _send_message(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = int(params.get("chat_id", 0))
        if chat_id not in self.chats:
            raise _Refusal(400, "Bad Request: chat not found")
        message = FakeMessage(
            next(self._message_ids),
            chat_id,
            self._text(params),
            self._check_markup(params.get("reply_markup")),
        )
        self.messages[(chat_id, message.message_id)] = message
        return message.as_result()

    def _edit_message_text(self, params: dict[str, Any]) -> dict[str, Any]:
        key = (int(params.get("chat_id", 0)), int(params.get("message_id", 0)))
        message = self.messages.get(key)
        if message is None:
            raise _Refusal(400, "Bad Request: message to edit not found")
        text = self._text(params)
        markup = self._check_markup(params.get("reply_markup"))
        same_markup = (
            (message.buttons() == []) if markup is None else markup == message.reply_markup
        )
        if text == message.text and same_markup:
            raise _Refusal(400, NOT_MODIFIED)
        message.text, message.reply_markup = text, markup
        message.edits += 1
        return message.as_result()

    def _answer_callback_query(self, params: dict[str, Any]) -> bool:
        query_id = str(params.get("callback_query_id", ""))
        if query_id not in self.issued_queries or query_id in self.answers:
            raise _Refusal(400, TOO_OLD)
        text = str(params.get("text", ""))
        if len(text) > 200:
            raise _Refusal(400, "Bad Request: text is too long")
        self.answers[query_id] = text
        return True

    def _set_webhook(self, params: dict[str, Any]) -> bool:
        url = params.get("url")
        secret = params.get("secret_token")
        if not isinstance(url, str):
            raise _Refusal(400, "Bad Request: bad webhook: an HTTPS URL must be provided")
        if secret is not None and not SECRET_TOKEN.fullmatch(str(secret)):
            raise _Refusal(400, "Bad Request: secret token contains unallowed characters")
        self.webhook_url = url or None
        self.webhook_secret = secret
        return True

    def _get_webhook_info(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"url": self.webhook_url or "", "pending_update_count": 0}

    # -- control (for scripts) ----------------------------------------------------------

    def _control(self, verb: str, path: str, raw: bytes) -> tuple[int, Any]:
        if verb == "GET" and path.startswith("/_fake/chats/"):
            chat_id = int(path.rsplit("/", 1)[1])
            return 200, {
                "messages": [
                    {
                        "message_id": m.message_id,
                        "text": m.text,
                        "buttons": [b["text"] for b in m.buttons()],
                    }
                    for m in self.chat(chat_id)
                ]
            }
        if verb == "POST" and path == "/_fake/press":
            asked = json.loads(raw or b"{}")
            status, answer = self.press(
                int(asked["chat_id"]), int(asked["user_id"]), asked.get("button", "Approve")
            )
            return 200, {"status": status, "answer": answer}
        if verb == "GET" and path == "/_fake/health":
            return 200, {"ok": True}
        return 404, {"error": "not_found"}

    def _log(self, entry: dict[str, Any]) -> None:
        append_json_line(self.log_path, self.lock, entry)


def main() -> None:
    parser = argparse.ArgumentParser(description="A fake Telegram Bot API on loopback.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token-env", required=True, help="the variable holding the bot token")
    parser.add_argument("--chat", type=int, action="append", default=[], help="a known chat id")
    parser.add_argument("--log", type=Path, help="one JSON line per request and update")
    args = parser.parse_args()
    fake = FakeTelegram(os.environ[args.token_env], set(args.chat), args.log).start(args.port)
    serve_until_signalled(fake.stop)


if __name__ == "__main__":
    main()
