"""What every channel does, whatever the platform (``channels.platform``).

- :meth:`ChannelService.intake`: a proposer hands over a presentation (its
  token, the preview the ledger rendered, who it is for). The token is sealed
  into the state file; the message, with Approve and Decline buttons that
  carry only a random reference, goes to the conversation of its channel
  binding.
- :meth:`ChannelService.press`: a verified press (the platform module checked
  the request came from the platform). Only the user of the presentation's
  identity binding, in the conversation it was sent to, may press; the
  service approves or declines with the provenance it asserts for its own
  channel, and answers the presser at once.
- :meth:`ChannelService.ledger_event`: a verified webhook of the ledger moves
  every message of that proposal version forward (succeeded, failed, needs
  an operator, declined, expired).
- :meth:`ChannelService.sync`: the outbox. Every send and edit is made from
  the state file (what a message should show against what it shows), on one
  thread, so nothing is sent twice at once and a restart finishes what a
  crash cut off.
"""

from __future__ import annotations

import logging
import random
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from channels.ledger import Asserted, Conflicted, Refused, Unreachable
from channels.outcomes import (
    STATUS_LINE_ROOM,
    Decision,
    Phase,
    Reply,
    outcomes_of,
    render,
    reply_to_decided,
    vote_reply,
)
from channels.platform import Action, Platform, PlatformError, Press
from channels.sealing import Sealer, SealError
from channels.state import Held, State
from channels.users import Users

REFERENCE_BYTES = 16
"""128 random bits per presentation: what a button carries instead of the token."""
INTAKE_WAIT_SECONDS = 5.0
MAX_BACKOFF_SECONDS = 300.0
IDLE_SECONDS = 5.0
PRUNE_EVERY_SECONDS = 3600.0
_STRIPES = 64


class Deciding(Protocol):
    """The ledger as the service uses it (``channels.ledger.LedgerGateway``)."""

    def decide(self, action: Action, token: str, who: Asserted) -> Decision: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Intake:
    """A presentation handed over by its proposer."""

    token: str
    presentation_id: str
    proposal_id: str
    version: int
    expires_at: datetime
    preview: str
    provenance: Asserted


class IntakeError(Exception):
    """The intake is refused: a stable code, a safe detail and the HTTP status."""

    def __init__(self, code: str, detail: str, status: int = 422) -> None:
        super().__init__(detail)
        self.code, self.detail, self.status = code, detail, status


def display_time(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%d %H:%M UTC")


class ChannelService:
    """One channel: its platform, its state, its users file and the ledger."""

    def __init__(
        self,
        platform: Platform,
        state: State,
        sealer: Sealer,
        users: Users,
        ledger: Deciding,
        *,
        clock: Callable[[], float] = time.time,
        logger: logging.Logger | None = None,
    ) -> None:
        self.platform = platform
        self.state = state
        self.sealer = sealer
        self.users = users
        self.ledger = ledger
        self.clock = clock
        self.log = logger or logging.getLogger(f"ledger.channels.{platform.name}")
        self._stripes = [threading.Lock() for _ in range(_STRIPES)]
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._progress = threading.Condition()
        self._thread: threading.Thread | None = None
        self._pruned_at = 0.0

    # -- intake -------------------------------------------------------------------------

    def intake(self, item: Intake, *, wait: float = INTAKE_WAIT_SECONDS) -> tuple[str, Held]:
        """Hold a presentation and send its message: ``("sent" | "queued", row)``.
        The same presentation again (a retried request) sends nothing new."""
        who = item.provenance
        user = self.users.user_of(who.identity_binding_id)
        conversation = self.users.conversation_of(who.channel_binding_id)
        if user is None:
            raise IntakeError(
                "unknown_binding",
                f"identity binding {who.identity_binding_id} has no user in the users file",
            )
        if conversation is None:
            raise IntakeError(
                "unknown_binding",
                f"channel binding {who.channel_binding_id} has no conversation in the users file",
            )
        if len(item.preview) + STATUS_LINE_ROOM > self.platform.max_text:
            limit = self.platform.max_text - STATUS_LINE_ROOM
            raise IntakeError("preview_too_long", f"preview: at most {limit} characters here")
        now = self.clock()
        expires = item.expires_at.timestamp()
        if expires <= now:
            raise IntakeError("presentation_expired", "expires_at: already past")
        reference = secrets.token_urlsafe(REFERENCE_BYTES)
        held = Held(
            reference=reference,
            presentation_id=item.presentation_id,
            token_mac=self.sealer.mac(item.token),
            sealed_token=self.sealer.seal(item.token, reference),
            proposal_id=item.proposal_id,
            version=item.version,
            actor_id=who.actor_id,
            identity_binding_id=who.identity_binding_id,
            channel_binding_id=who.channel_binding_id,
            conversation_key=who.conversation_key,
            user=user,
            conversation=conversation,
            preview=item.preview,
            expires_at=display_time(expires),
            expires_epoch=expires,
            phase=Phase.OPEN,
            created_at=now,
            updated_at=now,
        )
        stored, created = self.state.add(held)
        if not created and not _same_intake(stored, held):
            raise IntakeError(
                "presentation_conflict",
                f"{item.presentation_id} is held with another token or content",
                status=409,
            )
        if created:
            self.log.info(
                "presentation held: %s (proposal %s v%d)",
                held.presentation_id,
                held.proposal_id,
                held.version,
            )
        self.wake()
        sent = self._wait_sent(stored.reference, wait)
        return ("sent" if sent else "queued"), stored

    def _wait_sent(self, reference: str, wait: float) -> bool:
        def sent() -> bool:
            row = self.state.get(reference)
            return row is not None and row.message_id is not None

        with self._progress:
            return self._progress.wait_for(sent, timeout=wait)

    # -- a press ------------------------------------------------------------------------

    def press(self, press: Press) -> str:
        """Decide what a verified press asks, answer the presser, and return the answer."""
        reply = self._decide(press)
        try:
            self.platform.answer(press, reply)
        except PlatformError as exc:
            self.log.warning("could not answer a press: %s", exc)
        return reply

    def _decide(self, press: Press) -> str:
        held = self.state.get(press.reference)
        if held is None:
            self.log.info("press refused: no such presentation")
            return Reply.NOT_AVAILABLE.value
        if not _pressed_by_its_actor(held, press):
            self.log.info("press refused: %s is not for this user here", held.presentation_id)
            return Reply.NOT_FOR_YOU.value
        with self._stripes[hash(press.reference) % _STRIPES]:
            return self._decide_held(press)

    def _decide_held(self, press: Press) -> str:
        held = self.state.get(press.reference)
        assert held is not None  # rows are never deleted
        now = self.clock()
        if held.phase is Phase.VOTED:
            return vote_reply(held.votes, held.required)
        if held.phase is not Phase.OPEN:
            return reply_to_decided(held.phase)
        if now >= held.expires_epoch or held.sealed_token is None:
            self._record(held, Decision(Phase.EXPIRED), now)
            return Reply.EXPIRED.value
        try:
            token = self.sealer.open(held.sealed_token, held.reference)
        except SealError:
            self.log.error("the sealed token of %s does not open", held.presentation_id)
            return Reply.TRY_AGAIN.value
        who = Asserted(
            held.actor_id, held.identity_binding_id, held.channel_binding_id, held.conversation_key
        )
        try:
            decision = self.ledger.decide(press.action, token, who)
        except Refused:
            expired = self.clock() >= held.expires_epoch
            self._record(held, Decision(Phase.EXPIRED if expired else Phase.UNAVAILABLE), now)
            self.log.info("%s: the ledger refused %s", held.presentation_id, press.action.value)
            return (Reply.EXPIRED if expired else Reply.NOT_AVAILABLE).value
        except Conflicted:
            self._record(held, Decision(Phase.CONFLICTED), now)
            return Reply.CONFLICTED.value
        except Unreachable as exc:
            self.log.warning("%s: the ledger did not decide (%s)", held.presentation_id, exc)
            return Reply.TRY_AGAIN.value
        self._record(held, decision, now)
        self.log.info(
            "%s: %s -> %s", held.presentation_id, press.action.value, decision.phase.value
        )
        if decision.phase is Phase.VOTED:
            return vote_reply(decision.votes, decision.required)
        if decision.phase is Phase.DECLINED:
            return Reply.DECLINED.value
        if press.action is Action.DECLINE:  # an approval of a sibling won the race
            return Reply.ALREADY_APPROVED.value
        return Reply.APPROVED.value

    def _record(self, held: Held, decision: Decision, now: float) -> None:
        self.state.decide(held.reference, decision, now)
        self.wake()

    # -- the ledger's webhooks ----------------------------------------------------------

    def ledger_event(self, event: Mapping[str, Any]) -> int:
        """Apply a verified webhook; how many messages it moved."""
        now = self.clock()
        moved = sum(self.state.apply(outcome, now) for outcome in outcomes_of(event))
        if moved:
            self.log.info("ledger %s moved %d message(s)", event.get("type"), moved)
            self.wake()
        return moved

    # -- the outbox ---------------------------------------------------------------------

    def sync(self) -> int:
        """One pass: expire what is due, then send or edit every message that shows
        less than it should; how many it sent or edited."""
        now = self.clock()
        self.state.expire_due(now)
        done = 0
        for held in self.state.due(now):
            done += self._show(held, now)
            with self._progress:
                self._progress.notify_all()
        if now - self._pruned_at > PRUNE_EVERY_SECONDS:
            self.state.prune(now)
            self._pruned_at = now
        return done

    def _show(self, held: Held, now: float) -> int:
        message = render(
            held.phase,
            held.preview,
            held.reference,
            detail=held.detail,
            votes=held.votes,
            required=held.required,
            expires_at=held.expires_at,
        )
        where = held.sent
        try:
            if held.message_id is None and held.phase in (Phase.OPEN, Phase.VOTED):
                sent = self.platform.send(held.conversation, message)
                self.state.mark_sent(held.reference, sent, held.revision)
                self.log.info("message sent: %s", held.presentation_id)
                return 1
            if where is None:  # decided before its message went out: none will
                self.state.mark_shown(held.reference, held.revision, unsent=True)
                return 0
            self.platform.edit(where, message)
        except PlatformError as exc:
            if exc.permanent:
                self.log.warning("%s: giving up on its message: %s", held.presentation_id, exc)
                self.state.mark_shown(held.reference, held.revision)
                return 0
            delay = exc.retry_after
            if delay is None:
                delay = random.uniform(0.5, 1.0) * min(MAX_BACKOFF_SECONDS, 2.0**held.tries)
            self.log.warning("%s: %s; again in %.1f s", held.presentation_id, exc, delay)
            self.state.retry_later(held.reference, now + delay)
            return 0
        self.state.mark_shown(held.reference, held.revision)
        self.log.info("message shows %s: %s", held.phase.value, held.presentation_id)
        return 1

    def wake(self) -> None:
        self._wake.set()

    def start(self) -> None:
        """Run the outbox on a thread of its own (first pass at once: a restart's leftovers)."""
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="channel-outbox", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            try:
                self.sync()
            except Exception as exc:  # the state file or a bug: keep going, say what
                self.log.error("outbox pass failed: %s", type(exc).__name__)
            self._wake.wait(self._idle_for())

    def _idle_for(self) -> float:
        """Until the next retry or expiry is due (at most ``IDLE_SECONDS``)."""
        now = self.clock()
        moments = [m for m in (self.state.next_due_at(), self.state.next_expiry()) if m is not None]
        if not moments:
            return IDLE_SECONDS
        return max(0.05, min(IDLE_SECONDS, min(moments) - now))


def _pressed_by_its_actor(held: Held, press: Press) -> bool:
    """The press came from the presentation's user, on the message it was sent as."""
    if press.user != held.user:
        return False
    if press.conversation != (held.message_conversation or held.conversation):
        return False
    return not (held.message_id and press.message_id and press.message_id != held.message_id)


def _same_intake(stored: Held, new: Held) -> bool:
    keys = (
        "token_mac",
        "proposal_id",
        "version",
        "actor_id",
        "identity_binding_id",
        "channel_binding_id",
        "conversation_key",
        "preview",
    )
    return all(getattr(stored, k) == getattr(new, k) for k in keys)
