"""Who is who on the platform: the users file of a channel.

The ledger's directory binds an actor to an identity binding and a
conversation to a channel binding. The channel service holds the other half:
which platform user is each identity binding, and which platform
conversation is each channel binding. It delivers a presentation to the
conversation of its channel binding, and accepts a press only from the user
of its identity binding, in that conversation. A TOML file::

    [identities]              # identity binding id = the platform's user id
    ib-alice-tg = 1001        # Telegram: from.id; Slack: "U0123ABCD"

    [conversations]           # channel binding id = the platform's conversation id
    cb-alice-dm = 1001        # Telegram: the chat id; Slack: a channel id or a user id (DM)

It is read at start-up; a change takes effect at the next start.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SECTIONS = ("identities", "conversations")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@\-]{0,199}")
_PLATFORM_ID = re.compile(r"-?[A-Za-z0-9_.:@\-]{1,100}")


class UsersFileError(Exception):
    """The users file cannot be read or is not what the channel expects."""


@dataclass(frozen=True)
class Users:
    """Identity bindings to platform users; channel bindings to platform conversations."""

    identities: dict[str, str]
    conversations: dict[str, str]

    def user_of(self, identity_binding_id: str) -> str | None:
        return self.identities.get(identity_binding_id)

    def conversation_of(self, channel_binding_id: str) -> str | None:
        return self.conversations.get(channel_binding_id)


def parse_users(data: dict[str, Any], where: str = "users file") -> Users:
    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        raise UsersFileError(f"{where}: unknown table {unknown[0]!r} (expected {SECTIONS})")
    tables: list[dict[str, str]] = []
    for section in SECTIONS:
        table = data.get(section, {})
        if not isinstance(table, dict):
            raise UsersFileError(f"{where}: [{section}] must be a table")
        parsed: dict[str, str] = {}
        for binding, value in table.items():
            if not _ID.fullmatch(binding):
                raise UsersFileError(f"{where}: [{section}] {binding!r} is not a binding id")
            if isinstance(value, bool) or not isinstance(value, int | str):
                raise UsersFileError(f"{where}: [{section}] {binding}: a string or an integer")
            text = str(value)
            if not _PLATFORM_ID.fullmatch(text):
                raise UsersFileError(f"{where}: [{section}] {binding}: not a platform id")
            parsed[binding] = text
        tables.append(parsed)
    return Users(identities=tables[0], conversations=tables[1])


def load_users(path: Path) -> Users:
    """The users file at ``path``; :class:`UsersFileError` naming the file and the problem."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsersFileError(f"users file {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsersFileError(f"users file {path}: not TOML: {exc}") from None
    return parse_users(data, f"users file {path}")
