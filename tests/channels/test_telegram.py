"""The Telegram channel against a fake Bot API on loopback and a real `ledger serve`
(SQLite and the emulator): the message and its buttons, a press approved once,
forged and replayed updates refused, a decline, a press after expiry, a kill
between the approval and the edit; and after every test, the redaction
canaries: no token, secret or preview in anything the fake got beyond the
messages' text, in any log line, or in the state file."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from domain.services.approval import Provenance
from ledger_client import PresentationOut, ProposalOut
from tests.support.channel_world import (
    ChannelUnderTest,
    LedgerUnderTest,
    assert_nothing_secret,
    secret,
    set_webhook,
    wait_for,
)
from tests.support.fake_telegram import FakeMessage, FakeTelegram


@dataclass
class World:
    """One test's actor in a Telegram direct chat with the bot."""

    ledger: LedgerUnderTest
    fake: FakeTelegram
    channel: ChannelUnderTest
    who: Provenance
    user: int
    canary: str = field(default_factory=lambda: "canary-" + secrets.token_hex(6))
    tokens: list[str] = field(default_factory=list)

    @property
    def chat(self) -> int:
        return self.user  # a direct chat's id is the user's

    def present(
        self, *, expires_in: float = 86400
    ) -> tuple[ProposalOut, PresentationOut, httpx.Response]:
        content = {"title": f"Buy milk ({self.canary})"}
        proposal, shown = self.ledger.propose_and_present(self.who, content, expires_in=expires_in)
        self.tokens.append(shown.token)
        ends = min(
            datetime.fromisoformat(shown.expires_at),
            datetime.now(UTC) + timedelta(seconds=expires_in),
        )
        answer = self.channel.hand_over(proposal, shown, self.who, expires_at=ends.isoformat())
        return proposal, shown, answer

    def message(self) -> FakeMessage:
        (only,) = self.fake.chat(self.chat)
        return only

    def data(self, button: str = "Approve") -> str:
        return next(b["callback_data"] for b in self.message().buttons() if b["text"] == button)

    def deliver(self, data: str, user: int | None = None) -> tuple[int, str | None]:
        """A press of the button with ``data`` (kept from before any edit)."""
        update = self.fake.update_for_press(
            self.chat, self.user if user is None else user, self.message().message_id, data
        )
        status = self.fake.deliver(update)
        return status, self.fake.answers.get(update["callback_query"]["id"])

    def shows(self, text: str) -> FakeMessage:
        return self.fake.wait_for(
            lambda: text in self.message().text and self.message(), what=f"the message: {text}"
        )

    def check_redaction(self) -> None:
        """The canaries: nothing secret anywhere, and no preview in a log line."""
        hidden = [*self.channel.secrets(), *self.tokens]
        sent = self.fake.everything_sent_to_it()
        assert_nothing_secret(sent, hidden, "the Bot API")
        logs = "\n".join(self.channel.logs.lines) + self.channel.process_log()
        assert_nothing_secret(logs, hidden, "a log line of the channel")
        assert self.canary not in logs, "the preview reached a log line"
        assert_nothing_secret(self.ledger.log.read_text(), self.tokens, "the ledger's log")
        for path in self.channel.workdir.glob("telegram-channel.db*"):
            assert_nothing_secret(
                path.read_bytes().decode("latin-1"), self.tokens, f"the state file {path.name}"
            )


@pytest.fixture
def unstarted(ledger: LedgerUnderTest, tmp_path: Path) -> Iterator[World]:
    who = ledger.enrol("telegram")
    user = secrets.randbelow(10**9) + 10**6
    bot_token = f"{secrets.randbelow(10**9)}:{secret()}"
    fake = FakeTelegram(bot_token, {user}).start()
    channel = ChannelUnderTest(
        "telegram",
        ledger,
        tmp_path,
        fake.url,
        {"BOT_TOKEN": bot_token, "WEBHOOK_SECRET": secret()},
        users={
            "identities": {who.identity_binding_id: str(user)},
            "conversations": {who.channel_binding_id: str(user)},
        },
    )
    world = World(ledger, fake, channel, who, user)
    set_webhook(channel)
    assert fake.webhook_secret == channel.platform_secrets["WEBHOOK_SECRET"]
    try:
        yield world
    finally:
        channel.stop()
        fake.stop()
    world.check_redaction()


@pytest.fixture
def world(unstarted: World) -> World:
    unstarted.channel.start()
    return unstarted


def test_the_message_carries_the_preview_and_buttons_but_never_the_token(
    sqlite_only: None, world: World
) -> None:
    proposal, shown, answer = world.present()
    assert answer.status_code == 202, answer.text
    assert answer.json() == {"presentation_id": shown.presentation_id, "status": "sent"}
    message = world.message()
    preview, _, status = message.text.rpartition("\n\n")
    assert preview == proposal.preview and status.startswith("Approve or decline by ")
    buttons = message.buttons()
    assert [b["text"] for b in buttons] == ["Approve", "Decline"]
    for button in buttons:
        assert len(button["callback_data"].encode()) <= 64
        assert shown.token not in button["callback_data"]
    # a retried hand-over sends nothing new; another token under the same id is refused
    assert world.channel.hand_over(proposal, shown, world.who).status_code == 202
    assert len(world.fake.chat(world.chat)) == 1
    other = world.channel.hand_over(proposal, shown, world.who, token=secret())
    assert (other.status_code, other.json()["error"]) == (409, "presentation_conflict")
    # the intake wants its token, and never repeats a value it was sent
    intake = f"{world.channel.url}/presentations"
    assert httpx.post(intake, json={"token": shown.token}).status_code == 401
    bad = httpx.post(
        intake,
        json={"token": shown.token, "version": "x"},
        headers={"Authorization": f"Bearer {world.channel.intake_token}"},
    )
    assert bad.status_code == 422 and bad.json()["error"] == "invalid_input"
    assert shown.token not in bad.text


def test_approve_pressed_twice_makes_one_approval_and_the_message_shows_the_outcome(
    world: World,
) -> None:
    proposal, _, _ = world.present()
    approve = world.data("Approve")
    with ThreadPoolExecutor(2) as pool:
        pressed = list(pool.map(lambda _: world.deliver(approve), range(2)))
    assert sorted(answer for _, answer in pressed) == ["Already approved.", "Approved."]
    view = world.ledger.proposal(proposal.proposal_id)
    (version,) = view.versions
    (presentation,) = view.presentations
    assert (version.status, presentation.status) == ("claimed", "consumed")
    assert version.attempt_id is not None
    assert world.ledger.wait_settled(version.attempt_id) == "succeeded"
    settled = world.shows("Approved. Done: it succeeded.")
    assert settled.buttons() == []
    assert world.deliver(approve) == (200, "Already approved.")
    assert world.ledger.proposal(proposal.proposal_id).versions[0].attempt_id == version.attempt_id
    assert len(world.fake.calls_of("sendMessage")) == 1


def test_a_forged_or_replayed_update_is_refused_and_changes_nothing(world: World) -> None:
    proposal, _, _ = world.present()
    message = world.message()
    approve = world.data("Approve")
    update = world.fake.update_for_press(world.chat, world.user, message.message_id, approve)
    assert world.fake.deliver(update, secret="not-" + secret()) == 401
    assert world.fake.deliver(update, secret="") == 401
    assert world.fake.calls_of("answerCallbackQuery") == []
    # another user in the chat, and a made-up button, are answered and change nothing
    assert world.deliver(approve, user=world.user + 1) == (200, "This approval is not for you.")
    made_up = "a." + secrets.token_urlsafe(16)
    assert world.deliver(made_up) == (200, "This approval is not available.")
    assert world.ledger.proposal(proposal.proposal_id).versions[0].status == "presented"
    assert world.message().edits == 0
    # the genuine press, then the same update again: one answer, one approval
    assert world.fake.deliver(update) == 200
    assert world.fake.answers[update["callback_query"]["id"]] == "Approved."
    world.shows("Approved.")
    answered = len(world.fake.calls_of("answerCallbackQuery"))
    assert world.fake.deliver(update) == 200
    assert len(world.fake.calls_of("answerCallbackQuery")) == answered == 3
    assert world.ledger.proposal(proposal.proposal_id).versions[0].status == "claimed"


def test_a_decline_declines_and_the_message_says_so(sqlite_only: None, world: World) -> None:
    proposal, _, _ = world.present()
    approve = world.data("Approve")
    assert world.deliver(world.data("Decline")) == (200, "Declined.")
    assert world.ledger.proposal(proposal.proposal_id).versions[0].status == "declined"
    assert world.shows("Declined. Nothing will be done.").buttons() == []
    assert world.deliver(approve) == (200, "Already declined.")  # a button still on a screen


def test_a_press_after_expiry_is_answered_expired(world: World) -> None:
    proposal, _, _ = world.present(expires_in=3)
    approve = world.data("Approve")
    expired = world.shows("Expired: it can no longer be approved.")
    assert expired.buttons() == []
    assert world.deliver(approve) == (200, "This approval has expired.")
    view = world.ledger.proposal(proposal.proposal_id)
    assert (view.versions[0].status, view.versions[0].attempt_id) == ("expired", None)


def test_the_channel_killed_between_approval_and_edit_edits_after_restart(
    sqlite_only: None, unstarted: World
) -> None:
    world = unstarted
    world.fake.fail("editMessageText")
    world.channel.start_process()
    proposal, _, answer = world.present()
    assert answer.json()["status"] == "sent"
    assert world.deliver(world.data("Approve")) == (200, "Approved.")
    attempt = world.ledger.proposal(proposal.proposal_id).versions[0].attempt_id
    assert attempt is not None and world.ledger.wait_settled(attempt) == "succeeded"

    def edit_tried(text: str) -> Any:
        return any(text in c.params.get("text", "") for c in world.fake.calls_of("editMessageText"))

    wait_for(lambda: edit_tried("Done: it succeeded."), 60, "the outcome's edit to be tried")
    world.channel.kill_process()  # the outcome is recorded, the message still says nothing
    assert "Done" not in world.message().text
    world.fake.recover("editMessageText")
    world.channel.start_process()
    world.shows("Approved. Done: it succeeded.")
    assert len(world.fake.calls_of("sendMessage")) == 1
    assert world.ledger.proposal(proposal.proposal_id).versions[0].attempt_id == attempt
