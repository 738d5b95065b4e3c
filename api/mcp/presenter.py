"""Where a presentation goes: the actor's channel, never the agent (docs/mcp.md).

``propose_action`` stores the proposal, presents it to the actor's configured
bindings and hands the :class:`Presentation` (its single-use token, the
provenance it is bound to and the preview the actor must see) to the
presenter, and to nothing else. The agent's answer carries ids and hashes.

Two presenters: a :class:`WebhookPresenter` POSTs the presentation as JSON,
signed as Standard Webhooks (``webhook-id`` is the presentation id, so a
receiver drops a repeat), to a channel service that shows it to the actor and
forwards the actor's approval (``POST /approvals`` with the token and, as a
channel service, the provenance); any callable taking a :class:`Presentation`
is one too (an embedding host, a test). A delivery that fails is an error of
the tool call; the same call again with the same ``idempotency_key`` presents
the same presentation and delivers the same token again.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import httpx

from adapters.webhooks.standard import headers
from api.mcp.config import PresenterEntry
from domain.errors import LedgerError
from domain.services.approval import Provenance

EVENT_TYPE = "proposal.presented"


@dataclass(frozen=True)
class Presentation:
    """One presentation for its channel: the token is for the actor's eyes only."""

    proposal_id: str
    version: int
    presentation_id: str
    token: str
    expires_at: str
    provenance: Provenance
    capability: str
    payload_hash: str
    view_hash: str
    preview: str

    def __repr__(self) -> str:  # the token never reaches a log line through repr
        return f"Presentation({self.presentation_id} of {self.proposal_id} v{self.version})"

    def body(self) -> dict[str, Any]:
        """The JSON a channel receives."""
        data = asdict(self)
        data["provenance"] = asdict(self.provenance)
        return {"type": EVENT_TYPE, **data}


Presenter = Callable[[Presentation], None]
"""Delivers one presentation to the actor's channel; raises when it could not."""


class PresentationNotDelivered(LedgerError):
    """The presentation is stored but its channel did not take it."""

    code = "presentation_not_delivered"
    default_detail = (
        "The actor's channel did not receive the presentation; call again with the same "
        "idempotency_key to deliver the same presentation."
    )


class NoPresenter(LedgerError):
    """``ledger mcp`` has no ``[presenter]`` configured: nothing could reach the actor."""

    code = "no_presenter"
    default_detail = "No presenter is configured, so no actor can be asked to approve."


class WebhookPresenter:
    """POSTs each presentation, signed, to the configured channel service."""

    def __init__(
        self, entry: PresenterEntry, secret: str, *, client: httpx.Client | None = None
    ) -> None:
        self.entry = entry
        self._secret = secret
        # httpx logs every request line at INFO: the channel's URL stays out of the logs.
        for name in ("httpx", "httpcore"):
            logging.getLogger(name).setLevel(logging.WARNING)
        self._client = client or httpx.Client(trust_env=False, follow_redirects=False)

    def __repr__(self) -> str:
        return "WebhookPresenter()"

    def __call__(self, presentation: Presentation) -> None:
        body = json.dumps(presentation.body(), separators=(",", ":"), sort_keys=True).encode()
        sent = headers(self._secret, presentation.presentation_id, int(time.time()), body)
        try:
            response = self._client.post(
                self.entry.url, content=body, headers=sent, timeout=self.entry.timeout_seconds
            )
        except httpx.HTTPError:
            raise PresentationNotDelivered() from None
        if not 200 <= response.status_code < 300:
            raise PresentationNotDelivered()

    def close(self) -> None:
        self._client.close()
