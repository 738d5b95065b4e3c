"""A quorum through the Telegram channel against a real `ledger serve` (SQLite and
the emulator): a policy set asking three members of a group (applied through
PUT /policies), each member presented through their own bindings and sent their
own message in their own chat; two of them pressing at once, twice each, are
counted once each; every message shows the votes so far as the ledger answered
them; the third press claims, the attempt settles and every message ends with
the outcome. Then the redaction canaries, as for every channel test."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from domain.services.approval import Provenance
from ledger_client import PresentationOut
from tests.support.channel_world import (
    FAKE,
    ChannelUnderTest,
    LedgerUnderTest,
    assert_nothing_secret,
    secret,
    set_webhook,
)
from tests.support.fake_telegram import FakeMessage, FakeTelegram

GROUP = "payments-approvers"
POLICIES = f"""@id("three-person-payments")
@quorum("3")
@group("{GROUP}")
permit (principal, action == Action::"{FAKE}", resource)
when {{ context.content has amount && context.content.amount > 500 }};
"""


@dataclass
class Member:
    """A member of the group, in their own direct chat with the bot."""

    who: Provenance
    user: int
    shown: PresentationOut | None = None
    approve: str = ""  # the Approve button's callback data, kept from before any edit


@dataclass
class Quorum:
    ledger: LedgerUnderTest
    fake: FakeTelegram
    channel: ChannelUnderTest
    requester: Provenance
    members: list[Member]

    def message(self, member: Member) -> FakeMessage:
        (only,) = self.fake.chat(member.user)
        return only

    def press(self, member: Member) -> str | None:
        update = self.fake.update_for_press(
            member.user, member.user, self.message(member).message_id, member.approve
        )
        assert self.fake.deliver(update) == 200
        return self.fake.answers.get(update["callback_query"]["id"])

    def shows(self, member: Member, text: str) -> FakeMessage:
        return self.fake.wait_for(
            lambda: text in self.message(member).text and self.message(member),
            what=f"the message of {member.user}: {text}",
        )


@pytest.fixture
def quorum(ledger: LedgerUnderTest, tmp_path: Path) -> Iterator[Quorum]:
    ledger.apply_policies(POLICIES)
    requester = ledger.enrol("telegram")
    first = secrets.randbelow(10**9) + 10**6
    members = [Member(ledger.enrol("telegram", [GROUP]), first + i) for i in range(3)]
    bot_token = f"{secrets.randbelow(10**9)}:{secret()}"
    fake = FakeTelegram(bot_token, {m.user for m in members}).start()
    channel = ChannelUnderTest(
        "telegram",
        ledger,
        tmp_path,
        fake.url,
        {"BOT_TOKEN": bot_token, "WEBHOOK_SECRET": secret()},
        users={
            "identities": {m.who.identity_binding_id: str(m.user) for m in members},
            "conversations": {m.who.channel_binding_id: str(m.user) for m in members},
        },
    )
    set_webhook(channel)
    world = Quorum(ledger, fake, channel, requester, members)
    channel.start()
    try:
        yield world
    finally:
        channel.stop()
        fake.stop()
    tokens = [m.shown.token for m in members if m.shown is not None]
    hidden = [*channel.secrets(), *tokens]
    assert_nothing_secret(fake.everything_sent_to_it(), hidden, "the Bot API")
    assert_nothing_secret("\n".join(channel.logs.lines), hidden, "a log line of the channel")
    assert_nothing_secret(ledger.log.read_text(), tokens, "the ledger's log")


def test_three_approvers_each_their_own_message_two_at_once_counted_once_each(
    quorum: Quorum,
) -> None:
    ledger, members = quorum.ledger, quorum.members
    proposal = ledger.propose(quorum.requester, {"title": "Pay the supplier", "amount": 900})
    for member in members:
        member.shown = ledger.present_to_member(proposal, member.who)
        handed = quorum.channel.hand_over(proposal, member.shown, member.who)
        assert (handed.status_code, handed.json()["status"]) == (202, "sent"), handed.text
        message = quorum.message(member)
        assert message.text.startswith(proposal.preview + "\n\nApprove or decline by ")
        member.approve = next(
            b["callback_data"] for b in message.buttons() if b["text"] == "Approve"
        )
    a, b, c = members

    with ThreadPoolExecutor(4) as pool:  # two approvers, each pressing twice, all at once
        answers = list(pool.map(quorum.press, [a, b, a, b]))
    counted = {"Your approval is counted: 1 of 3.", "Your approval is counted: 2 of 3."}
    assert set(answers) == counted, answers  # the ledger told one 1 of 3, the other 2 of 3
    (version,) = ledger.proposal(proposal.proposal_id).versions
    assert sorted(version.votes) == sorted([a.who.actor_id, b.who.actor_id])
    assert (version.status, version.attempt_id) == ("presented", None)
    for voter in (a, b):
        voted = quorum.shows(voter, "Your approval is counted: 2 of 3. Waiting for the others.")
        assert voted.buttons() == []
    assert quorum.shows(c, "2 of 3 approvals so far. Approve or decline").buttons() != []

    assert quorum.press(c) == "Approved."  # the third vote claims
    (version,) = ledger.proposal(proposal.proposal_id).versions
    assert version.status == "claimed" and version.attempt_id is not None
    assert version.approval is not None and version.approval.kind == "quorum"
    assert sorted(version.approval.approvers) == sorted(m.who.actor_id for m in members)
    assert ledger.wait_settled(version.attempt_id) == "succeeded"
    for member in members:
        settled = quorum.shows(member, "Approved. Done: it succeeded.")
        assert settled.text.endswith("Approved. Done: it succeeded.")
        assert settled.buttons() == []
    assert quorum.press(a) == "Already approved."  # a button kept on a screen
    assert ledger.proposal(proposal.proposal_id).versions[0].attempt_id == version.attempt_id
    assert len(quorum.fake.calls_of("sendMessage")) == 3
