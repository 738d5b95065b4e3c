"""What the sync and the async client share: each operation as a :class:`Call`,
how a request is made from one, and how an answer or a failure is judged.

The two clients differ only in how they send and sleep; every rule about
keys, retries and answers lives here once.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from ledger_client import answers as a
from ledger_client import requests as r
from ledger_client._base import DecodeError, Model, decode
from ledger_client.errors import (
    LedgerClientError,
    LedgerConnectionError,
    UnexpectedResponse,
    error_from_answer,
)
from ledger_client.retry import RETRY_CODES, RETRY_STATUSES, RetryPolicy, retry_after_seconds

__version__ = "0.1.0"

API_PREFIX = "/api/conversational"
USER_AGENT = f"execution-ledger-client/{__version__} (python)"
MAX_WAIT_SECONDS = 30
"""The server's longest single long poll (``?wait=1..30``)."""

T = TypeVar("T")
TokenSource = str | Callable[[], str] | None

# Raised before a byte of the request left: sending it again is always safe.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def new_idempotency_key() -> str:
    """A fresh 256-bit key (43 URL-safe characters): one per logical call."""
    return secrets.token_urlsafe(32)


def segment(value: str | int) -> str:
    """One path segment, escaped (an id can never reach another route)."""
    return quote(str(value), safe="")


@dataclass(frozen=True)
class Call(Generic[T]):
    """One operation: what to send and what the answer is.

    ``resend_safe``: the server deduplicates the request (by its
    Idempotency-Key, or by design), so it may be sent again after an answer
    was lost. Every POST carries a key, whatever the route.
    """

    method: str
    path: str
    answer: type[T]
    body: Model | None = None
    params: Mapping[str, str | int] | None = None
    resend_safe: bool = True
    idempotency_key: str | None = None
    timeout: float | None = None


class Base:
    """Configuration and the request rules both clients use."""

    def __init__(
        self,
        base_url: str,
        *,
        token: TokenSource = None,
        timeout: float = 10.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        root = base_url.rstrip("/")
        self.api_url = root if root.endswith(API_PREFIX) else root + API_PREFIX
        self.token = token
        self.timeout = timeout
        self.retry = retry or RetryPolicy()

    def headers(self, call: Call[Any], key: str | None) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        token = self.token() if callable(self.token) else self.token
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if key is not None:
            headers["Idempotency-Key"] = key
        return headers

    def request_args(self, call: Call[Any], key: str | None) -> dict[str, Any]:
        """Keyword arguments of ``httpx.Client.request`` for one try."""
        args: dict[str, Any] = {
            "method": call.method,
            "url": self.api_url + call.path,
            "headers": self.headers(call, key),
            "timeout": call.timeout if call.timeout is not None else self.timeout,
        }
        if call.params:
            args["params"] = dict(call.params)
        if call.body is not None:
            args["json"] = call.body.to_json()
        return args


def key_for(call: Call[Any]) -> str | None:
    """The Idempotency-Key of a logical call: the caller's, else a new one for a POST."""
    if call.method != "POST":
        return None
    return call.idempotency_key or new_idempotency_key()


@dataclass(frozen=True)
class Verdict:
    """What one try came to: an error, and whether to try again (after ``retry_after``)."""

    error: LedgerClientError
    retry: bool
    retry_after: float | None = None


def judge_failure(call: Call[Any], exc: httpx.TransportError) -> Verdict:
    """A try that got no answer."""
    error = LedgerConnectionError(f"{type(exc).__name__}: {exc}".rstrip(": "))
    if isinstance(exc, _NOT_SENT):
        return Verdict(error, retry=True)
    if isinstance(exc, httpx.LocalProtocolError | httpx.UnsupportedProtocol):
        return Verdict(error, retry=False)
    return Verdict(error, retry=call.resend_safe)


def judge_answer(call: Call[T], response: httpx.Response) -> T | Verdict:
    """The typed answer of a 2xx, or the verdict on any other status."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.is_success:
        if body is None:
            return _unexpected(response, "not JSON")
        try:
            return decode(call.answer, body)
        except DecodeError as exc:
            return _unexpected(response, str(exc))
    error = error_from_answer(response.status_code, body)
    retry = response.status_code in RETRY_STATUSES or error.code in RETRY_CODES
    return Verdict(error, retry=retry, retry_after=retry_after_seconds(response.headers))


def _unexpected(response: httpx.Response, why: str) -> Verdict:
    error = UnexpectedResponse(f"HTTP {response.status_code}: {why}", status=response.status_code)
    return Verdict(error, retry=False)


# -- the operations --------------------------------------------------------------------


def get(path: str, answer: type[T], **params: str | int | None) -> Call[T]:
    kept = {name: value for name, value in params.items() if value is not None}
    return Call("GET", path, answer, params=kept or None)


def post(
    path: str, answer: type[T], body: Model, *, key: str | None = None, resend_safe: bool = True
) -> Call[T]:
    return Call("POST", path, answer, body=body, idempotency_key=key, resend_safe=resend_safe)


def put(path: str, answer: type[T], body: Model) -> Call[T]:
    return Call("PUT", path, answer, body=body)


def proposal_ref(proposal: str | a.ProposalOut | a.ProposalViewOut) -> str:
    return proposal if isinstance(proposal, str) else proposal.proposal_id


def version_of(
    proposal: str | a.ProposalOut | a.ProposalViewOut, version: int | None, what: str
) -> int:
    """The version a call names: given, or the proposal answer's own."""
    if version is not None:
        return version
    if isinstance(proposal, a.ProposalOut):
        return proposal.version
    if isinstance(proposal, a.ProposalViewOut):
        return proposal.current_version
    raise TypeError(f"{what}: give version= with a proposal id")


def attempt_ref(attempt: str | a.ApprovalOut | a.AttemptOut) -> str:
    if isinstance(attempt, str):
        return attempt
    if attempt.attempt_id is None:
        raise TypeError("a vote_recorded answer has no attempt yet (the quorum is not met)")
    return attempt.attempt_id


def bindings(
    to: r.Provenance | None,
    identity_binding_id: str | None,
    channel_binding_id: str | None,
    conversation_key: str | None,
) -> tuple[str, str, str]:
    """The three bindings of a presentation: from ``to``, or each given."""
    if to is not None:
        if identity_binding_id or channel_binding_id or conversation_key:
            raise TypeError("present: give either to= or the three bindings, not both")
        return to.identity_binding_id, to.channel_binding_id, to.conversation_key
    if not (identity_binding_id and channel_binding_id and conversation_key):
        raise TypeError(
            "present: give to=Provenance(...) or identity_binding_id, "
            "channel_binding_id and conversation_key"
        )
    return identity_binding_id, channel_binding_id, conversation_key


def propose(
    actor_id: str,
    spec: r.ProposalSpec,
    lineage_id: str | None,
    expected_version: int | None,
    key: str | None,
) -> Call[a.ProposalOut]:
    body = r.ProposalIn(actor_id, spec, lineage_id=lineage_id, expected_version=expected_version)
    return post("/proposals", a.ProposalOut, body, key=key)


def present(
    proposal: str | a.ProposalOut | a.ProposalViewOut,
    version: int | None,
    identity_binding_id: str,
    channel_binding_id: str,
    conversation_key: str,
    ttl_seconds: int | None,
    key: str | None,
    actor_id: str | None = None,
) -> Call[a.PresentationOut]:
    body = r.PresentationIn(
        version=version_of(proposal, version, "present"),
        identity_binding_id=identity_binding_id,
        channel_binding_id=channel_binding_id,
        conversation_key=conversation_key,
        ttl_seconds=ttl_seconds,
        actor_id=actor_id,
    )
    path = f"/proposals/{segment(proposal_ref(proposal))}/presentations"
    return post(path, a.PresentationOut, body, key=key)


def cancel(
    proposal: str | a.ProposalOut | a.ProposalViewOut, version: int | None, key: str | None
) -> Call[a.ProposalViewOut]:
    body = r.CancelIn(version=version_of(proposal, version, "cancel"))
    path = f"/proposals/{segment(proposal_ref(proposal))}/cancel"
    return post(path, a.ProposalViewOut, body, key=key)


def approve(body: r.ApprovalIn) -> Call[a.ApprovalOut]:
    # A repeated approval of the same presentation answers the stored attempt.
    return post("/approvals", a.ApprovalOut, body)


def decline(body: r.DeclineIn) -> Call[a.DeclineOut]:
    # A repeated decline answers the stored truth.
    return post("/declines", a.DeclineOut, body)


def wait_call(attempt_id: str, seconds: int, timeout: float) -> Call[a.AttemptOut]:
    """One long poll, with a read timeout longer than the wait itself."""
    path = f"/execution-attempts/{segment(attempt_id)}"
    return Call("GET", path, a.AttemptOut, params={"wait": seconds}, timeout=seconds + timeout)


def wait_seconds(remaining: float) -> int:
    """The ``?wait=`` of the next long poll: the whole seconds left, within 1..30."""
    return max(1, min(MAX_WAIT_SECONDS, int(remaining)))


def reconcile(attempt_id: str, expected_revision: int) -> Call[a.AttemptOut]:
    # Runs only the read-only reconciler; a repeat answers the stored state.
    body = r.ReconcileIn(expected_revision=expected_revision)
    return post(f"/execution-attempts/{segment(attempt_id)}/reconcile", a.AttemptOut, body)


def resolve(
    attempt_id: str,
    expected_revision: int,
    resolution: str,
    reason: str,
    receipt: dict[str, Any] | None,
) -> Call[a.AttemptOut]:
    # A repeat with the same verdict answers the stored state.
    body = r.ResolveIn(expected_revision, resolution, reason, receipt=receipt)
    return post(f"/execution-attempts/{segment(attempt_id)}/resolve", a.AttemptOut, body)


def directory(kind: str, *ids: str) -> str:
    return "/directory/" + kind + "".join("/" + segment(i) for i in ids)


def apply_policies(text: str, expected_version: int | None) -> Call[a.PolicySetOut]:
    return put("/policies", a.PolicySetOut, r.PolicySetIn(text, expected_version))


def grant(
    actor_id: str | None,
    provenance: r.Provenance | None,
    capability: str,
    max_uses: int,
    expires_at: datetime | str,
    bounds: tuple[str | None, str | None, Iterable[r.ConditionIn | Mapping[str, Any]]],
) -> Call[a.StandingGrantOut]:
    """POST /standing-grants; never sent again after a lost answer (a second
    request would make a second grant: list the actor's grants instead)."""
    destination, effect, conditions = bounds
    body = r.StandingGrantIn(
        capability=capability,
        expires_at=expires_at if isinstance(expires_at, str) else utc_text(expires_at),
        max_uses=max_uses,
        actor_id=actor_id,
        provenance=r.ProvenanceIn.of(provenance) if provenance is not None else None,
        destination=destination,
        effect=effect,
        conditions=[c if isinstance(c, r.ConditionIn) else r.ConditionIn(**c) for c in conditions]
        or None,
    )
    return post("/standing-grants", a.StandingGrantOut, body, resend_safe=False)


def revoke_grant(grant_id: str, provenance: r.Provenance | None) -> Call[a.StandingGrantOut]:
    # Revoking twice changes nothing: a retry answers the revoked grant.
    body = r.RevokeGrantIn(r.ProvenanceIn.of(provenance) if provenance is not None else None)
    return post(f"/standing-grants/{segment(grant_id)}/revoke", a.StandingGrantOut, body)


def utc_text(moment: datetime) -> str:
    """An aware datetime as the server's UTC text (``...Z``)."""
    if moment.tzinfo is None:
        raise TypeError("give an aware datetime (with a timezone)")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
