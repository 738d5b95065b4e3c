"""What a chat platform must offer a channel: send, edit and answer.

The service (``channels.service``) speaks only these types; ``channels.telegram``
and ``channels.slack`` turn them into their platform's requests. A platform
never sees a presentation token: a button carries the presentation's
reference, 128 random bits that only this service can map to the token.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class Action(StrEnum):
    """What a button asks for."""

    APPROVE = "approve"
    DECLINE = "decline"


@dataclass(frozen=True)
class Button:
    """One button under a message: its label, what it does and for which presentation."""

    label: str
    action: Action
    reference: str


@dataclass(frozen=True)
class Message:
    """What a message shows: plain text (never markup) and its buttons. ``text``
    is the whole of it; ``preview`` and ``status`` its two parts, for a platform
    that lays them out apart (Slack's blocks)."""

    text: str
    buttons: tuple[Button, ...] = ()
    preview: str = ""
    status: str = ""


@dataclass(frozen=True)
class SentMessage:
    """Where a message went: the platform's conversation id and message id."""

    conversation: str
    message_id: str


@dataclass(frozen=True)
class Press:
    """A verified button press: who pressed which button, where.

    ``query`` is what the platform needs to answer this press (Telegram's
    callback query id); ``message`` the message the button was under, when
    the platform says."""

    reference: str
    action: Action
    user: str
    conversation: str
    message_id: str | None
    query: str | None = None


class PlatformError(Exception):
    """The platform refused or did not answer. ``retry_after``: when to try
    again (seconds; None for the service's own backoff); ``permanent``: trying
    again cannot help (the message is gone)."""

    def __init__(
        self, what: str, *, retry_after: float | None = None, permanent: bool = False
    ) -> None:
        super().__init__(what)
        self.retry_after = retry_after
        self.permanent = permanent


class Platform(Protocol):
    """A chat platform as a channel uses it."""

    name: str
    max_text: int

    def send(self, conversation: str, message: Message) -> SentMessage:
        """Post a new message; where it went."""
        ...

    def edit(self, where: SentMessage, message: Message) -> None:
        """Replace what a message shows (text and buttons)."""
        ...

    def answer(self, press: Press, text: str) -> None:
        """Tell the presser, and only the presser, what their press did."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...
