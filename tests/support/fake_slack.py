"""A fake Slack on loopback: the Web API methods the channel uses, with the
documented request and answer shapes, and the users who press its buttons.

Web API (``POST /api/<method>``, a JSON body with ``Authorization: Bearer
xoxb-...``; every answer is HTTP 200 with ``{"ok": true, ...}`` or ``{"ok":
false, "error": "<code>"}``, and 429 with ``Retry-After`` when rate limited):

- ``chat.postMessage`` (``channel``: a channel id, or a user id for the DM
  with the app; ``text``; ``blocks``: section text at most 3000 characters,
  button ``value`` at most 2000, ``action_id`` at most 255) answers ``channel``,
  ``ts`` and ``message``; an unknown channel is ``channel_not_found``;
- ``chat.update`` (``channel``, ``ts``, ``text``, ``blocks``) answers
  ``channel``, ``ts``, ``text``; ``message_not_found``;
- ``chat.postEphemeral`` (``channel``, ``user``, ``text``) answers ``message_ts``.

A wrong token is ``invalid_auth``. ``fail`` makes a method answer HTTP 503 for
a while (an outage).

A user's press (:meth:`FakeSlack.press`) is what Slack does: a
``block_actions`` interaction payload, form-encoded as ``payload=<json>``,
signed with the app's signing secret (``X-Slack-Request-Timestamp`` and
``X-Slack-Signature: v0=<hex HMAC-SHA256 of "v0:<ts>:<body>">``) and POSTed to
the app's interactivity Request URL.

Run alone (the README does): ``python -m tests.support.fake_slack --port P
--token-env NAME --secret-env NAME --request-url URL --user U0ALICE --log
FILE``; then ``POST /_fake/press`` ``{"user", "channel", "button"}`` and ``GET
/_fake/conversations/<channel>`` (its messages and the ephemeral answers).
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
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
from urllib.parse import urlencode

import httpx

from tests.support.http_server import (
    append_json_line,
    reply_json,
    serve_on_loopback,
    serve_until_signalled,
)

MAX_SECTION_TEXT = 3000
MAX_VALUE = 2000


# The content type Slack's Web API answers with.
SLACK_JSON = "application/json; charset=utf-8"


@dataclass
class SlackMessage:
    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    edits: int = 0

    def buttons(self) -> list[dict[str, Any]]:
        return [
            element
            for block in self.blocks
            if block.get("type") == "actions"
            for element in block.get("elements", [])
            if element.get("type") == "button"
        ]

    def shown(self) -> str:
        """What a person sees: every text of every block."""
        parts = []
        for block in self.blocks:
            if isinstance(block.get("text"), dict):
                parts.append(block["text"].get("text", ""))
            for element in block.get("elements", []):
                if element.get("type") in ("plain_text", "mrkdwn"):
                    parts.append(element.get("text", ""))
        return "\n".join(parts) or self.text


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    answer: dict[str, Any]


class _Refusal(Exception):
    def __init__(self, error: str) -> None:
        self.error = error


def sign(secret: str, timestamp: int, body: bytes) -> str:
    base = f"v0:{timestamp}:".encode() + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


@dataclass
class FakeSlack:
    """The fake Web API of one app, its channels and users, and its Request URL."""

    token: str
    signing_secret: str
    channels: set[str] = field(default_factory=set)
    request_url: str | None = None
    log_path: Path | None = None

    def __post_init__(self) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.calls: list[Call] = []
        self.requests_sent: list[str] = []
        self.messages: dict[tuple[str, str], SlackMessage] = {}
        self.ephemeral: list[dict[str, str]] = []
        self.failing: dict[str, int] = {}
        self._ts = itertools.count(100)
        self._triggers = itertools.count(1)
        self.server: ThreadingHTTPServer | None = None

    # -- running ------------------------------------------------------------------------

    def start(self, port: int = 0) -> FakeSlack:
        self.server = serve_on_loopback(self._handle, port)
        return self

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/api"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def fail(self, method: str, times: int = 1_000_000) -> None:
        with self.lock:
            self.failing[method] = times

    def recover(self, method: str) -> None:
        with self.lock:
            self.failing.pop(method, None)

    # -- what it saw --------------------------------------------------------------------

    def calls_of(self, method: str) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.method == method]

    def conversation(self, channel: str) -> list[SlackMessage]:
        with self.lock:
            return [m for (c, _), m in sorted(self.messages.items()) if c == channel]

    def ephemeral_to(self, user: str) -> list[str]:
        with self.lock:
            return [e["text"] for e in self.ephemeral if e["user"] == user]

    def wait_for(self, condition: Any, timeout: float = 30.0, what: str = "a change") -> Any:
        with self.changed:
            found = self.changed.wait_for(condition, timeout=timeout)
        if not found:
            raise AssertionError(f"fake Slack: timed out waiting for {what}")
        return found

    def everything_sent_to_it(self) -> str:
        with self.lock:
            return json.dumps([c.params for c in self.calls] + self.requests_sent)

    # -- a user ------------------------------------------------------------------------

    def payload_for_press(
        self, user: str, message: SlackMessage, action_id: str, value: str
    ) -> dict[str, Any]:
        """The ``block_actions`` payload Slack sends when ``user`` presses a button."""
        trigger = next(self._triggers)
        return {
            "type": "block_actions",
            "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": "T0"},
            "api_app_id": "A0LEDGER",
            "token": "deprecated-verification-token",
            "container": {
                "type": "message",
                "message_ts": message.ts,
                "channel_id": message.channel,
                "is_ephemeral": False,
            },
            "trigger_id": f"{trigger}.0.{hashlib.sha256(str(trigger).encode()).hexdigest()[:8]}",
            "team": {"id": "T0", "domain": "acme"},
            "channel": {"id": message.channel, "name": "directmessage"},
            "message": {"type": "message", "ts": message.ts, "text": message.text},
            "response_url": f"{self.url}/response/{trigger}",
            "actions": [
                {
                    "type": "button",
                    "action_id": action_id,
                    "block_id": "ledger_approval",
                    "value": value,
                    "action_ts": f"{time.time():.6f}",
                    "text": {"type": "plain_text", "text": action_id.title()},
                }
            ],
        }

    def body_of(self, payload: dict[str, Any]) -> bytes:
        return urlencode({"payload": json.dumps(payload)}).encode()

    def send_signed(
        self, body: bytes, *, timestamp: int | None = None, secret: str | None = None
    ) -> tuple[int, dict[str, str]]:
        """POST a form body to the Request URL, signed as Slack does (or with ``secret``)."""
        assert self.request_url is not None, "no Request URL configured"
        stamp = int(time.time()) if timestamp is None else timestamp
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Slack-Request-Timestamp": str(stamp),
            "X-Slack-Signature": sign(secret or self.signing_secret, stamp, body),
        }
        return self.send_raw(body, headers), headers

    def send_raw(self, body: bytes, headers: dict[str, str]) -> int:
        assert self.request_url is not None, "no Request URL configured"
        with self.lock:
            self.requests_sent.append(body.decode())
        self._log({"interaction": body.decode()})
        return httpx.post(self.request_url, content=body, headers=headers, timeout=30).status_code

    def press(
        self, user: str, channel: str, button: str = "Approve", ts: str | None = None
    ) -> tuple[int, str | None]:
        """``user`` presses ``button`` under the channel's last message with buttons (or
        ``ts``): the Request URL's status and the ephemeral answer the user got."""
        message = self._message_with_buttons(channel, ts)
        chosen = next(b for b in message.buttons() if b["text"]["text"] == button)
        before = len(self.ephemeral_to(user))
        payload = self.payload_for_press(user, message, chosen["action_id"], chosen["value"])
        status, _ = self.send_signed(self.body_of(payload))
        answers = self.ephemeral_to(user)
        return status, answers[-1] if len(answers) > before else None

    def _message_with_buttons(self, channel: str, ts: str | None) -> SlackMessage:
        with self.lock:
            if ts is not None:
                return self.messages[(channel, ts)]
            with_buttons = [m for m in self.conversation(channel) if m.buttons()]
            if not with_buttons:
                raise AssertionError(f"no message with buttons in {channel}")
            return with_buttons[-1]

    # -- the Web API --------------------------------------------------------------------

    def _handle(self, request: BaseHTTPRequestHandler, verb: str) -> None:
        length = int(request.headers.get("content-length") or 0)
        raw = request.rfile.read(length) if length else b""
        if request.path.startswith("/_fake/"):
            status, body = self._control(verb, request.path, raw)
            reply_json(request, status, body, SLACK_JSON)
            return
        match = re.fullmatch(r"/api/([A-Za-z.]+)", request.path.split("?")[0])
        if match is None:
            reply_json(
                request,
                404,
                {"ok": False, "error": "unknown_method"},
                "application/json; charset=utf-8",
            )
            return
        method = match.group(1)
        try:
            params = json.loads(raw) if raw else {}
        except ValueError:
            params = {}
        status, answer = self._method(method, params, request.headers.get("authorization", ""))
        with self.changed:
            self.calls.append(Call(method, params, answer))
            self.changed.notify_all()
        self._log({"method": method, "params": params, "status": status})
        reply_json(request, status, answer, SLACK_JSON)

    def _method(
        self, method: str, params: dict[str, Any], authorization: str
    ) -> tuple[int, dict[str, Any]]:
        with self.lock:
            left = self.failing.get(method, 0)
            if left > 0:
                self.failing[method] = left - 1
                return 503, {"ok": False, "error": "service_unavailable"}
            if authorization != f"Bearer {self.token}":
                return 200, {"ok": False, "error": "invalid_auth"}
            handler = {
                "chat.postMessage": self._post_message,
                "chat.update": self._update,
                "chat.postEphemeral": self._post_ephemeral,
            }.get(method)
            if handler is None:
                return 200, {"ok": False, "error": "unknown_method"}
            try:
                return 200, {"ok": True, **handler(params)}
            except _Refusal as refusal:
                return 200, {"ok": False, "error": refusal.error}

    def _channel_of(self, target: Any) -> str:
        """A channel id as is; a user id is their DM with the app (``D`` + the rest)."""
        if not isinstance(target, str) or target not in self.channels:
            raise _Refusal("channel_not_found")
        return "D" + target[1:] if target.startswith("U") else target

    @staticmethod
    def _check_blocks(params: dict[str, Any]) -> list[dict[str, Any]]:
        blocks = params.get("blocks")
        if blocks is None:
            if not params.get("text"):
                raise _Refusal("no_text")
            return []
        if not isinstance(blocks, list):
            raise _Refusal("invalid_blocks")
        for block in blocks:
            text = block.get("text")
            if isinstance(text, dict) and len(text.get("text", "")) > MAX_SECTION_TEXT:
                raise _Refusal("invalid_blocks")
            for element in block.get("elements", []):
                if element.get("type") == "button" and (
                    len(element.get("value", "")) > MAX_VALUE
                    or not 0 < len(element.get("action_id", "")) <= 255
                ):
                    raise _Refusal("invalid_blocks")
        return blocks

    def _post_message(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel_of(params.get("channel"))
        blocks = self._check_blocks(params)
        ts = f"{int(time.time())}.{next(self._ts):06d}"
        message = SlackMessage(channel, ts, str(params.get("text", "")), blocks)
        self.messages[(channel, ts)] = message
        return {"channel": channel, "ts": ts, "message": {"type": "message", "ts": ts}}

    def _update(self, params: dict[str, Any]) -> dict[str, Any]:
        key = (str(params.get("channel")), str(params.get("ts")))
        message = self.messages.get(key)
        if message is None:
            raise _Refusal("message_not_found")
        message.blocks = self._check_blocks(params)
        message.text = str(params.get("text", ""))
        message.edits += 1
        return {"channel": key[0], "ts": key[1], "text": message.text}

    def _post_ephemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, user, text = params.get("channel"), params.get("user"), params.get("text")
        if not isinstance(channel, str) or not isinstance(user, str) or not text:
            raise _Refusal("invalid_arguments")
        self.ephemeral.append({"channel": channel, "user": user, "text": str(text)})
        return {"message_ts": f"{int(time.time())}.{next(self._ts):06d}"}

    # -- control (for scripts) ----------------------------------------------------------

    def _control(self, verb: str, path: str, raw: bytes) -> tuple[int, Any]:
        if verb == "GET" and path.startswith("/_fake/conversations/"):
            channel = path.rsplit("/", 1)[1]
            return 200, {
                "messages": [
                    {
                        "ts": m.ts,
                        "text": m.shown(),
                        "buttons": [b["text"]["text"] for b in m.buttons()],
                    }
                    for m in self.conversation(channel)
                ],
                "ephemeral": [e for e in self.ephemeral if e["channel"] == channel],
            }
        if verb == "POST" and path == "/_fake/press":
            asked = json.loads(raw or b"{}")
            status, answer = self.press(
                asked["user"], asked["channel"], asked.get("button", "Approve")
            )
            return 200, {"status": status, "answer": answer}
        if verb == "GET" and path == "/_fake/health":
            return 200, {"ok": True}
        return 404, {"error": "not_found"}

    def _log(self, entry: dict[str, Any]) -> None:
        append_json_line(self.log_path, self.lock, entry)


def main() -> None:
    parser = argparse.ArgumentParser(description="A fake Slack Web API on loopback.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token-env", required=True, help="the variable holding the bot token")
    parser.add_argument("--secret-env", required=True, help="the variable with the signing secret")
    parser.add_argument("--request-url", required=True, help="the app's interactivity URL")
    parser.add_argument(
        "--user", action="append", default=[], help="a user id or channel id it knows"
    )
    parser.add_argument("--log", type=Path, help="one JSON line per request and interaction")
    args = parser.parse_args()
    fake = FakeSlack(
        os.environ[args.token_env],
        os.environ[args.secret_env],
        set(args.user),
        args.request_url,
        args.log,
    ).start(args.port)
    serve_until_signalled(fake.stop)


if __name__ == "__main__":
    main()
