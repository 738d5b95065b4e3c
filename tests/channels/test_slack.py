"""The Slack channel against a fake Web API on loopback and a real `ledger serve`
(SQLite and the emulator): the Block Kit message and its buttons, a press
approved once, forged, stale and replayed requests refused by the signature
check, a decline, a press after expiry, a kill between the approval and the
``chat.update``; and after every test, the redaction canaries: no token,
secret or preview in anything the fake got beyond the messages, in any log
line, or in the state file."""

from __future__ import annotations

import secrets
import time
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
    wait_for,
)
from tests.support.fake_slack import FakeSlack, SlackMessage


@dataclass
class World:
    """One test's actor in the direct conversation with the app."""

    ledger: LedgerUnderTest
    fake: FakeSlack
    channel: ChannelUnderTest
    who: Provenance
    user: str
    canary: str = field(default_factory=lambda: "canary-" + secrets.token_hex(6))
    tokens: list[str] = field(default_factory=list)

    @property
    def dm(self) -> str:
        return "D" + self.user[1:]  # the app's DM with the user

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

    def message(self) -> SlackMessage:
        (only,) = self.fake.conversation(self.dm)
        return only

    def value(self, action_id: str = "approve") -> str:
        return next(b["value"] for b in self.message().buttons() if b["action_id"] == action_id)

    def body(self, value: str, action_id: str = "approve", user: str | None = None) -> bytes:
        payload = self.fake.payload_for_press(user or self.user, self.message(), action_id, value)
        return self.fake.body_of(payload)

    def deliver(
        self, value: str, action_id: str = "approve", user: str | None = None
    ) -> tuple[int, str | None]:
        """A signed press of the button with ``value`` (kept from before any edit)."""
        presser = user or self.user
        before = len(self.fake.ephemeral_to(presser))
        status, _ = self.fake.send_signed(self.body(value, action_id, presser))
        answers = self.fake.ephemeral_to(presser)
        return status, answers[-1] if len(answers) > before else None

    def shows(self, text: str) -> SlackMessage:
        return self.fake.wait_for(
            lambda: text in self.message().shown() and self.message(), what=f"the message: {text}"
        )

    def check_redaction(self) -> None:
        hidden = [*self.channel.secrets(), *self.tokens]
        assert_nothing_secret(self.fake.everything_sent_to_it(), hidden, "the Web API")
        logs = "\n".join(self.channel.logs.lines) + self.channel.process_log()
        assert_nothing_secret(logs, hidden, "a log line of the channel")
        assert self.canary not in logs, "the preview reached a log line"
        assert_nothing_secret(self.ledger.log.read_text(), self.tokens, "the ledger's log")
        for path in self.channel.workdir.glob("slack-channel.db*"):
            assert_nothing_secret(
                path.read_bytes().decode("latin-1"), self.tokens, f"the state file {path.name}"
            )


@pytest.fixture
def unstarted(ledger: LedgerUnderTest, tmp_path: Path) -> Iterator[World]:
    who = ledger.enrol("slack")
    user = "U" + secrets.token_hex(5).upper()
    bot_token = "xoxb-" + secret()
    signing_secret = secrets.token_hex(16)
    fake = FakeSlack(bot_token, signing_secret, {user}).start()
    channel = ChannelUnderTest(
        "slack",
        ledger,
        tmp_path,
        fake.url,
        {"BOT_TOKEN": bot_token, "SIGNING_SECRET": signing_secret},
        users={
            "identities": {who.identity_binding_id: user},
            "conversations": {who.channel_binding_id: user},
        },
    )
    fake.request_url = f"{channel.url}/slack/actions"
    world = World(ledger, fake, channel, who, user)
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


def test_the_message_is_blocks_with_the_preview_and_two_buttons(
    sqlite_only: None, world: World
) -> None:
    proposal, shown, answer = world.present()
    assert answer.status_code == 202, answer.text
    assert answer.json() == {"presentation_id": shown.presentation_id, "status": "sent"}
    message = world.message()
    section, context, actions = message.blocks
    assert section["text"] == {"type": "plain_text", "text": proposal.preview}
    assert context["elements"][0]["text"].startswith("Approve or decline by ")
    assert [b["action_id"] for b in actions["elements"]] == ["approve", "decline"]
    assert all(shown.token not in b["value"] for b in actions["elements"])
    (post,) = world.fake.calls_of("chat.postMessage")
    assert post.params["channel"] == world.user


def test_approve_pressed_twice_makes_one_approval_and_chat_update_shows_the_outcome(
    world: World,
) -> None:
    proposal, _, _ = world.present()
    approve = world.value("approve")
    with ThreadPoolExecutor(2) as pool:
        statuses = list(pool.map(lambda _: world.deliver(approve)[0], range(2)))
    assert statuses == [200, 200]
    assert sorted(world.fake.ephemeral_to(world.user)) == ["Already approved.", "Approved."]
    (version,) = world.ledger.proposal(proposal.proposal_id).versions
    assert version.status == "claimed" and version.attempt_id is not None
    assert world.ledger.wait_settled(version.attempt_id) == "succeeded"
    settled = world.shows("Approved. Done: it succeeded.")
    assert settled.buttons() == []
    assert world.fake.calls_of("chat.update")
    assert len(world.fake.calls_of("chat.postMessage")) == 1


def test_forged_stale_and_replayed_requests_are_refused_and_change_nothing(world: World) -> None:
    proposal, _, _ = world.present()
    approve = world.value("approve")
    body = world.body(approve)
    assert world.fake.send_signed(body, secret=secrets.token_hex(16))[0] == 401
    stale = int(time.time()) - 6 * 60
    assert world.fake.send_signed(body, timestamp=stale)[0] == 401
    unsigned = {"Content-Type": "application/x-www-form-urlencoded"}
    assert world.fake.send_raw(body, unsigned) == 401
    assert world.fake.calls_of("chat.postEphemeral") == []
    # another user, and a made-up button value, are answered and change nothing
    other = "U" + secrets.token_hex(5).upper()
    assert world.deliver(approve, user=other) == (200, "This approval is not for you.")
    made_up = secrets.token_urlsafe(16)
    assert world.deliver(made_up) == (200, "This approval is not available.")
    assert world.ledger.proposal(proposal.proposal_id).versions[0].status == "presented"
    assert world.message().edits == 0
    # the genuine request, then the very same signed request again: one approval
    status, headers = world.fake.send_signed(body)
    assert status == 200 and world.fake.ephemeral_to(world.user)[-1] == "Approved."
    answered = len(world.fake.calls_of("chat.postEphemeral"))
    assert world.fake.send_raw(body, headers) == 200
    assert len(world.fake.calls_of("chat.postEphemeral")) == answered
    assert world.ledger.proposal(proposal.proposal_id).versions[0].status == "claimed"


def test_a_decline_declines_and_the_message_says_so(sqlite_only: None, world: World) -> None:
    proposal, _, _ = world.present()
    approve = world.value("approve")
    assert world.deliver(world.value("decline"), "decline") == (200, "Declined.")
    assert world.ledger.proposal(proposal.proposal_id).versions[0].status == "declined"
    assert world.shows("Declined. Nothing will be done.").buttons() == []
    assert world.deliver(approve) == (200, "Already declined.")


def test_a_press_after_expiry_is_answered_expired(world: World) -> None:
    proposal, _, _ = world.present(expires_in=3)
    approve = world.value("approve")
    assert world.shows("Expired: it can no longer be approved.").buttons() == []
    assert world.deliver(approve) == (200, "This approval has expired.")
    view = world.ledger.proposal(proposal.proposal_id)
    assert (view.versions[0].status, view.versions[0].attempt_id) == ("expired", None)


def test_the_channel_killed_between_approval_and_update_updates_after_restart(
    sqlite_only: None, unstarted: World
) -> None:
    world = unstarted
    world.fake.fail("chat.update")
    world.channel.start_process()
    proposal, _, answer = world.present()
    assert answer.json()["status"] == "sent"
    assert world.deliver(world.value("approve")) == (200, "Approved.")
    attempt = world.ledger.proposal(proposal.proposal_id).versions[0].attempt_id
    assert attempt is not None and world.ledger.wait_settled(attempt) == "succeeded"

    def update_tried(text: str) -> Any:
        return any(text in c.params.get("text", "") for c in world.fake.calls_of("chat.update"))

    wait_for(lambda: update_tried("Done: it succeeded."), 60, "the outcome's update to be tried")
    world.channel.kill_process()
    assert "Done" not in world.message().shown()
    world.fake.recover("chat.update")
    world.channel.start_process()
    world.shows("Approved. Done: it succeeded.")
    assert len(world.fake.calls_of("chat.postMessage")) == 1
