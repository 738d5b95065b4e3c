"""The channel service without a ledger process (fast): what the channel decides
alone, and the pure parts (callback data, answers and webhooks read, settings,
users file, sealing).

The quorum against the real ledger is tests/channels/test_quorum.py. Here the
ledger is a stand-in at the service's one seam (``Deciding``) where what is
asserted is invisible from outside: a vote pressed again never reaches the
ledger, and the state file's tally and claim on every sibling message."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from channels.ledger import Asserted
from channels.outcomes import Decision, Phase, UnexpectedAnswer, approval_decision, outcomes_of
from channels.platform import Action, Press
from channels.sealing import Sealer, SealError, parse_key
from channels.service import ChannelService, Intake, IntakeError
from channels.settings import ChannelSettingsError, SlackSettings, TelegramSettings, load
from channels.slack.web_api import press_of as slack_press_of
from channels.state import State
from channels.telegram.bot_api import BotApi, callback_data, parse_callback_data
from channels.users import Users, UsersFileError, load_users
from tests.support.fake_telegram import FakeTelegram

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2030, 1, 1, tzinfo=UTC).timestamp()


class QuorumLedger:
    """``required`` distinct actors approve; then the one attempt is claimed."""

    def __init__(self, required: int) -> None:
        self.required = required
        self.voters: set[str] = set()
        self.calls = 0
        self.lock = threading.Lock()

    def decide(self, action: Action, token: str, who: Asserted) -> Decision:
        assert action is Action.APPROVE
        with self.lock:
            self.calls += 1
            self.voters.add(who.actor_id)
            if len(self.voters) >= self.required:
                answer = {"status": "execution_pending", "attempt_id": "att_quorum"}
            else:
                answer = {
                    "status": "vote_recorded",
                    "votes": len(self.voters),
                    "required": self.required,
                }
        return approval_decision(answer)

    def close(self) -> None:
        pass


class Quorum:
    """One proposal version presented to ``n`` approvers, each in their own chat."""

    def __init__(self, tmp: Path, n: int, required: int) -> None:
        self.users = [10_000 + i for i in range(n)]
        bot_token = f"42:{secrets.token_urlsafe(32)}"
        self.fake = FakeTelegram(bot_token, set(self.users)).start()
        self.ledger = QuorumLedger(required)
        users = Users(
            identities={f"ib-{u}": str(u) for u in self.users},
            conversations={f"cb-{u}": str(u) for u in self.users},
        )
        self.service = ChannelService(
            BotApi(self.fake.url, bot_token),
            State(tmp / "channel.db"),
            Sealer(secrets.token_bytes(32)),
            users,
            self.ledger,
            clock=lambda: NOW,
        )
        for u in self.users:
            self.service.intake(
                Intake(
                    token=secrets.token_urlsafe(32),
                    presentation_id=f"pres_{u}",
                    proposal_id="prop_q",
                    version=1,
                    expires_at=datetime.fromtimestamp(NOW, UTC) + timedelta(hours=1),
                    preview="Pay the invoice INV-7 (120.00 EUR)",
                    provenance=Asserted(f"actor-{u}", f"ib-{u}", f"cb-{u}", f"tg:{u}"),
                ),
                wait=0,
            )
        self.service.sync()

    def press(self, user: int) -> str:
        (message,) = self.fake.chat(user)
        data = next(b["callback_data"] for b in message.buttons() if b["text"] == "Approve")
        parsed = parse_callback_data(data)
        assert parsed is not None
        return self.service.press(
            Press(parsed[1], parsed[0], str(user), str(user), str(message.message_id))
        )

    def text(self, user: int) -> str:
        (message,) = self.fake.chat(user)
        return message.text

    def close(self) -> None:
        self.service.state.close()
        self.fake.stop()


@pytest.fixture
def quorum(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Quorum]:
    n, required = request.param
    world = Quorum(tmp_path, n, required)
    try:
        yield world
    finally:
        world.close()


@pytest.mark.parametrize("quorum", [(2, 2)], indirect=True)
def test_a_vote_pressed_again_is_answered_from_the_state_without_asking_the_ledger(
    quorum: Quorum,
) -> None:
    first, _ = quorum.users
    assert quorum.press(first) == "Your approval is counted: 1 of 2."
    assert quorum.press(first) == "Your approval is counted: 1 of 2."
    assert quorum.ledger.calls == 1


def test_an_intake_for_a_binding_without_a_user_is_refused(tmp_path: Path) -> None:
    service = ChannelService(
        BotApi("http://127.0.0.1:9", "1:x"),
        State(tmp_path / "c.db"),
        Sealer(secrets.token_bytes(32)),
        Users({}, {}),
        QuorumLedger(1),
        clock=lambda: NOW,
    )
    item = Intake(
        token="t" * 32,
        presentation_id="pres_1",
        proposal_id="prop_1",
        version=1,
        expires_at=datetime.fromtimestamp(NOW, UTC) + timedelta(hours=1),
        preview="x",
        provenance=Asserted("a", "ib-a", "cb-a", "k"),
    )
    with pytest.raises(IntakeError) as refused:
        service.intake(item, wait=0)
    assert refused.value.code == "unknown_binding" and service.state.count() == 0
    service.state.close()


# -- the pure parts --------------------------------------------------------------------


def test_callback_data_fits_telegram_and_reads_back() -> None:
    reference = secrets.token_urlsafe(16)
    data = callback_data(Action.DECLINE, reference)
    assert len(data.encode()) <= 64
    assert parse_callback_data(data) == (Action.DECLINE, reference)
    for bad in (None, "", "x.abc", "a.", "a" * 65, 7):
        assert parse_callback_data(bad) is None


def test_the_answers_the_channel_does_not_know_are_refused_not_guessed() -> None:
    assert approval_decision({"status": "execution_pending", "attempt_id": "a"}).phase is (
        Phase.APPROVED
    )
    for answer in (
        {"status": "vote_recorded"},
        {"status": "vote_recorded", "votes": -1, "required": 2},
        {"status": "execution_pending"},
        {"status": "nonsense"},
    ):
        with pytest.raises(UnexpectedAnswer):
            approval_decision(answer)


def test_webhooks_tell_outcomes_and_unknown_details_are_never_shown() -> None:
    (failed,) = outcomes_of(
        {
            "type": "attempt.failed_safe",
            "proposal_id": "prop_1",
            "proposal_version": 2,
            "status": "failed_safe",
            "result": {"reason_code": "Has spaces <b>and markup</b>"},
        }
    )
    assert (failed.phase, failed.version, failed.detail) == (Phase.FAILED_SAFE, 2, None)
    versions = [{"version": 1, "status": "superseded"}, {"version": 2, "status": "declined"}]
    told = outcomes_of({"type": "proposal.declined", "proposal_id": "p", "versions": versions})
    assert [(o.version, o.phase) for o in told] == [(1, Phase.UNAVAILABLE), (2, Phase.DECLINED)]
    assert outcomes_of({"type": "attempt.succeeded", "status": "succeeded"}) == []
    assert outcomes_of({"type": 3}) == []


def test_a_slack_payload_that_is_not_a_button_press_is_no_press() -> None:
    assert slack_press_of({"type": "view_submission"}) is None
    assert slack_press_of({"type": "block_actions", "user": {"id": "U1"}, "actions": []}) is None
    press = slack_press_of(
        {
            "type": "block_actions",
            "user": {"id": "U1"},
            "container": {"channel_id": "D1", "message_ts": "1.2"},
            "actions": [{"action_id": "approve", "value": "ref"}],
        }
    )
    assert press == Press("ref", Action.APPROVE, "U1", "D1", "1.2")


def test_sealed_tokens_open_only_under_their_key_and_row() -> None:
    key = secrets.token_bytes(32)
    sealed = Sealer(key).seal("the-token", "ref-1")
    assert b"the-token" not in sealed
    assert Sealer(key).open(sealed, "ref-1") == "the-token"
    with pytest.raises(SealError):
        Sealer(key).open(sealed, "ref-2")
    with pytest.raises(SealError):
        Sealer(secrets.token_bytes(32)).open(sealed, "ref-1")
    assert parse_key(key.hex()) == key
    with pytest.raises(ValueError):
        parse_key("too-short")


def test_settings_errors_name_the_variable_and_never_a_value(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    leaked = "short-" + secrets.token_hex(4)
    monkeypatch.setenv("TELEGRAM_LEDGER_URL", "http://127.0.0.1:8000")
    monkeypatch.setenv("TELEGRAM_INTAKE_TOKEN", leaked)
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", "has spaces " + leaked)
    with pytest.raises(ChannelSettingsError) as refused:
        load(TelegramSettings)
    message = str(refused.value)
    for variable in (
        "TELEGRAM_INTAKE_TOKEN",
        "TELEGRAM_WEBHOOK_SECRET",
        "TELEGRAM_BOT_TOKEN",
        "TELEGRAM_STATE_KEY",
    ):
        assert variable in message
    assert leaked not in message and "\n" not in message
    monkeypatch.setenv("TELEGRAM_INTAKE_TOKEN", secrets.token_urlsafe(32))
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", secrets.token_urlsafe(32))
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "1:x")
    monkeypatch.setenv("TELEGRAM_STATE_KEY", secrets.token_hex(32))
    monkeypatch.setenv("TELEGRAM_LEDGER_WEBHOOK_SECRET", secrets.token_urlsafe(32))
    monkeypatch.setenv("TELEGRAM_USERS_FILE", str(tmp_path / "users.toml"))
    with pytest.raises(ChannelSettingsError) as refused:
        load(TelegramSettings)
    assert str(refused.value) == (
        "invalid settings: set exactly one of TELEGRAM_LEDGER_TOKEN and TELEGRAM_LEDGER_TOKEN_FILE"
    )
    with pytest.raises(ChannelSettingsError, match="SLACK_LEDGER_URL"):
        load(SlackSettings)


def test_a_bad_users_file_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "users.toml"
    for text, expected in (
        ("[identities]\nib = true\n", "a string or an integer"),
        ("[people]\n", "unknown table 'people'"),
        ("[identities\n", "not TOML"),
        ('[conversations]\n"cb" = "has space"\n', "not a platform id"),
    ):
        path.write_text(text)
        with pytest.raises(UsersFileError, match=expected):
            load_users(path)
    with pytest.raises(UsersFileError, match="users file"):
        load_users(tmp_path / "missing.toml")
    path.write_text('[identities]\nib-a = 1001\n[conversations]\ncb-a = "-100200"\n')
    assert load_users(path) == Users({"ib-a": "1001"}, {"cb-a": "-100200"})


def test_no_module_of_the_channels_is_over_the_limit() -> None:
    sizes = {
        str(p.relative_to(ROOT)): len(p.read_text().splitlines())
        for p in ROOT.joinpath("channels").rglob("*.py")
    }
    assert "channels/service.py" in sizes
    assert {name: n for name, n in sizes.items() if n > 400} == {}


@pytest.mark.parametrize("quorum", [(2, 3)], indirect=True)
def test_a_vote_answered_late_never_shows_fewer_votes_than_a_sibling_told(
    quorum: Quorum,
) -> None:
    state = quorum.service.state
    mine, theirs = (state.by_presentation(f"pres_{u}") for u in quorum.users)
    assert mine is not None and theirs is not None
    state.decide(theirs.reference, _voted(2), NOW)  # tells my row: 2 so far
    state.decide(mine.reference, _voted(1), NOW)  # my earlier vote's answer, recorded late
    assert getattr(state.get(mine.reference), "votes", None) == 2


@pytest.mark.parametrize("quorum", [(3, 3)], indirect=True)
def test_the_vote_that_claims_shows_approved_on_every_message_of_the_version(
    quorum: Quorum,
) -> None:
    first, second, third = quorum.users
    assert quorum.press(first) == "Your approval is counted: 1 of 3."
    assert quorum.press(second) == "Your approval is counted: 2 of 3."
    assert quorum.press(third) == "Approved."
    rows = [quorum.service.state.by_presentation(f"pres_{u}") for u in quorum.users]
    assert [(r.phase, r.attempt_id) for r in rows if r is not None] == [
        (Phase.APPROVED, "att_quorum")
    ] * 3
    quorum.service.sync()
    for user in quorum.users:
        assert quorum.text(user).endswith("Approved. Running it...")


def _voted(votes: int) -> Decision:
    return Decision(Phase.VOTED, votes=votes, required=3)
