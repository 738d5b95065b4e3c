"""The two calls a channel makes to the ledger, through the Python client.

``POST /approvals`` and ``POST /declines``, each with the token and the
provenance this channel asserts for a binding of its own channel (the
ledger checks that both bindings are on this service's channel and that the
presentation was made to exactly this provenance). Both are safe to send
again: a repeat answers the stored truth, so the client's retries (and a
second press) can never make a second approval.

The answers are read from their JSON (``to_json()``) by
``channels.outcomes``, so a field the ledger adds (a quorum's ``votes`` and
``required``) reaches the channel as soon as the client carries it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from channels.outcomes import Decision, UnexpectedAnswer, approval_decision, decline_decision
from channels.platform import Action
from ledger_client import Client, Provenance, RetryPolicy
from ledger_client.errors import (
    ApprovalUnavailable,
    LedgerClientError,
    ProposalConflicted,
)

PRESS_RETRY = RetryPolicy(max_attempts=3, max_elapsed=8.0, base_delay=0.2, max_delay=2.0)
"""A press is answered in seconds: a few quick tries, then "try again"."""


class Refused(Exception):
    """The ledger's uniform refusal (404 approval_unavailable): expired, revoked,
    decided elsewhere or not this provenance's; it does not say which."""


class Conflicted(Exception):
    """The target moved past the spec's base revision: no attempt will be made."""


class Unreachable(Exception):
    """No usable answer (connection, 5xx, an unknown shape): nothing is known to have changed."""


@dataclass(frozen=True)
class Asserted:
    """Who decides, through what: the provenance of the presentation as held."""

    actor_id: str
    identity_binding_id: str
    channel_binding_id: str
    conversation_key: str


class LedgerGateway:
    """Approve and decline through the ledger's public API."""

    def __init__(self, base_url: str, token: Callable[[], str], *, timeout: float = 5.0) -> None:
        self._client = Client(base_url, token=token, timeout=timeout, retry=PRESS_RETRY)

    def close(self) -> None:
        self._client.close()

    def decide(self, action: Action, token: str, who: Asserted) -> Decision:
        provenance = Provenance(
            who.actor_id, who.identity_binding_id, who.channel_binding_id, who.conversation_key
        )
        try:
            if action is Action.APPROVE:
                return approval_decision(
                    self._client.approve(token, provenance=provenance).to_json()
                )
            return decline_decision(self._client.decline(token, provenance=provenance).to_json())
        except ApprovalUnavailable:
            raise Refused() from None
        except ProposalConflicted:
            raise Conflicted() from None
        except (LedgerClientError, UnexpectedAnswer) as exc:
            raise Unreachable(getattr(exc, "code", "unexpected_answer")) from None
