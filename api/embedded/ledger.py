"""The in-process ledger: every operation of the HTTP API as a method call.

Each method builds the same request schema the HTTP route validates, calls
the same service function (``api.service``) and returns the same typed
answer, so a request made here has the same effect and leaves the same
record as over HTTP; a refusal is the same ``domain.errors`` class whose
``code`` the HTTP API returns.

Who calls: the host application embedding the ledger is trusted the way the
HTTP API trusts its proposer and channel backends. Each method acts as the
role its operation needs (proposer to propose, channel with the actor's
provenance to approve, admin for the directory), under the subject the
ledger was opened with; ``acting_as(principal)`` gives a view that acts as
one fixed principal instead, with that role's rules and ownership checks
(an actor sees only its own attempts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from types import TracebackType
from typing import Any, Self, TypeVar

from adapters.audit.digests import Verdict
from adapters.bootstrap import Ledger
from adapters.executors.registry import RegistryEntry
from api.embedded.directory import DirectoryMethods
from api.embedded.engine import Engine
from api.embedded.policies import PolicyMethods
from api.http.schemas.attempts import (
    AttemptEventsOut,
    AttemptListOut,
    AttemptOut,
    ReconcileIn,
    ResolveIn,
)
from api.http.schemas.proposals import (
    ApprovalIn,
    ApprovalOut,
    CancelIn,
    DeclineIn,
    DeclineOut,
    InboxOut,
    PresentationIn,
    PresentationOut,
    ProposalIn,
    ProposalOut,
    ProposalViewOut,
)
from api.http.schemas.webhooks import DeliveryListOut, DeliveryOut
from api.service import attempts, audit, decisions, proposals, webhooks
from api.service.cursors import DEFAULT_PAGE
from api.service.executors import list_executors
from api.service.principal import Principal, Role
from api.service.validation import parse
from domain.attempt import AttemptStatus
from domain.digest import Digest
from domain.errors import InvalidInput
from domain.proposal import ProposalStatus
from domain.services.approval import Provenance
from projections.webhooks import DeliveryStatus

DEFAULT_SUBJECT = "embedded"
DEFAULT_WAIT_SECONDS = 30.0


class EmbeddedLedger(DirectoryMethods, PolicyMethods):
    """A ledger in this process: propose, present, approve, wait, resolve...

    Open one with :func:`api.embedded.open_ledger`; as a context manager it
    starts the worker, recovery and subscriber loops on enter (unless opened
    with ``start=False``) and stops them and closes the store on exit.
    """

    def __init__(
        self,
        wiring: Ledger,
        *,
        subject: str = DEFAULT_SUBJECT,
        start: bool = True,
        principal: Principal | None = None,
        engine: Engine | None = None,
    ) -> None:
        self._engine = engine or Engine(wiring)
        self._subject = subject
        self._start_on_enter = start
        self._principal = principal

    # -- the ledger and its loops ----------------------------------------------

    @property
    def wiring(self) -> Ledger:
        """The wired ledger underneath (settings, store, views, clock, metrics)."""
        return self._engine.wiring

    @property
    def running(self) -> bool:
        """True while the worker, recovery and subscriber loops run."""
        return self._engine.runtime is not None

    def start(self) -> None:
        """Start the worker, recovery and subscriber loops (as ``ledger serve``
        runs them beside the API); a second call does nothing."""
        self._engine.start()

    def stop(self) -> None:
        """Stop the loops (work in flight finishes its step); the store stays open."""
        self._engine.stop()

    def close(self) -> None:
        """Stop the loops and close the store. Every view of this ledger is closed."""
        self._engine.close()

    def __enter__(self) -> Self:
        if self._start_on_enter:
            self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def acting_as(self, principal: Principal) -> EmbeddedLedger:
        """The same ledger, every call made as ``principal`` (its role's rules apply)."""
        return EmbeddedLedger(
            self.wiring,
            subject=principal.subject,
            start=self._start_on_enter,
            principal=principal,
            engine=self._engine,
        )

    def _as(self, role: Role, provenance: Provenance | None = None) -> Principal:
        """Who this call is made as: the fixed principal, or the host in ``role``."""
        if self._principal is not None:
            if provenance is not None and provenance != self._principal.provenance:
                raise InvalidInput("provenance: this view acts as a fixed principal")
            return self._principal
        if role is Role.CHANNEL:
            if provenance is None:
                raise InvalidInput("provenance: needed to approve or decline")
            return Principal(subject=self._subject, role=role, provenance=provenance)
        return Principal(subject=self._subject, role=role)

    # -- proposals ---------------------------------------------------------------

    def propose(
        self,
        actor_id: str,
        spec: Mapping[str, Any],
        *,
        lineage_id: str | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
    ) -> ProposalOut:
        """Store a proposal version for ``actor_id`` (with ``lineage_id``: version
        n+1 of that lineage, superseding n). ``spec`` is the wire format of
        ``POST /proposals``."""
        body = parse(
            ProposalIn,
            {
                "actor_id": actor_id,
                "spec": spec,
                "lineage_id": lineage_id,
                "expected_version": expected_version,
            },
        )
        return proposals.propose(
            self.wiring, self._as(Role.PROPOSER), body, idempotency_key=idempotency_key
        )

    def present(
        self,
        proposal_id: str,
        *,
        version: int,
        identity_binding_id: str,
        channel_binding_id: str,
        conversation_key: str,
        ttl_seconds: int | None = None,
        idempotency_key: str | None = None,
        actor_id: str | None = None,
    ) -> PresentationOut:
        """A single-use presentation of one version, bound to one identity
        binding, channel binding and conversation; its token is shown only here.
        ``actor_id``: a quorum member's own presentation (docs/policies.md)."""
        body = parse(
            PresentationIn,
            {
                "version": version,
                "identity_binding_id": identity_binding_id,
                "channel_binding_id": channel_binding_id,
                "conversation_key": conversation_key,
                "ttl_seconds": ttl_seconds,
                "actor_id": actor_id,
            },
        )
        return proposals.present(
            self.wiring,
            self._as(Role.PROPOSER),
            proposal_id,
            body,
            idempotency_key=idempotency_key,
        )

    def get_proposal(self, proposal_id: str) -> ProposalViewOut:
        """Versions, statuses, hashes, presentations (never tokens), attempt ids."""
        return proposals.get_proposal(self.wiring, self._as(Role.PROPOSER), proposal_id)

    def cancel(
        self, proposal_id: str, *, version: int, idempotency_key: str | None = None
    ) -> ProposalViewOut:
        """Withdraw a presented version: no attempt can ever come from it."""
        body = parse(CancelIn, {"version": version})
        return proposals.cancel(
            self.wiring,
            self._as(Role.PROPOSER),
            proposal_id,
            body,
            idempotency_key=idempotency_key,
        )

    def inbox(
        self,
        actor_id: str,
        *,
        status: ProposalStatus | str = ProposalStatus.PRESENTED,
        limit: int = DEFAULT_PAGE,
        cursor: str | None = None,
    ) -> InboxOut:
        """An actor's proposals in one status (what it still has to approve,
        soonest expiry first, by default); ``next_cursor`` pages on."""
        return proposals.inbox(
            self.wiring,
            self._as(Role.ADMIN),
            actor_id,
            _enum(ProposalStatus, status, "status"),
            limit=limit,
            cursor=cursor,
        )

    # -- decisions -----------------------------------------------------------------

    def approve(self, token: str, *, provenance: Provenance | None = None) -> ApprovalOut:
        """The actor approves through its channel (``provenance``: who, through
        which bindings and conversation). Queues the one attempt; never executes.
        Every refusal is the same ``ApprovalUnavailable``. Acting as a channel
        service (``acting_as(Principal(..., channel="telegram"))``), the
        provenance is asserted by it: only bindings on its channel are accepted."""
        principal, asserted = self._decider(provenance)
        body = parse(ApprovalIn, {"token": token, "provenance": asserted})
        return decisions.approve(self.wiring, principal, body)

    def decline(self, token: str, *, provenance: Provenance | None = None) -> DeclineOut:
        """The actor says no: the proposal is declined and no attempt is made."""
        principal, asserted = self._decider(provenance)
        body = parse(DeclineIn, {"token": token, "provenance": asserted})
        return decisions.decline(self.wiring, principal, body)

    def _decider(self, provenance: Provenance | None) -> tuple[Principal, dict[str, str] | None]:
        """Who decides, and the provenance a channel service asserts in its request."""
        fixed = self._principal
        if fixed is not None and fixed.channel is not None and fixed.provenance is None:
            return fixed, None if provenance is None else asdict(provenance)
        return self._as(Role.CHANNEL, provenance), None

    # -- attempts ------------------------------------------------------------------

    def status(self, attempt_id: str) -> AttemptOut:
        """The redacted status view of an attempt."""
        return attempts.get_attempt(self.wiring, self._as(Role.ADMIN), attempt_id)

    def wait(self, attempt_id: str, *, timeout: float = DEFAULT_WAIT_SECONDS) -> AttemptOut:
        """The status as soon as the attempt settles (terminal or
        ``outcome_unknown``), or after ``timeout`` seconds with its status then.

        It ends early on this process's writes: with the loops running here
        (``start``), the worker's result wakes it at once."""
        if not timeout > 0:
            raise InvalidInput("timeout: must be more than 0 seconds")
        return attempts.wait_attempt(self.wiring, self._as(Role.ADMIN), attempt_id, timeout)

    def attempts(
        self,
        status: AttemptStatus | str,
        *,
        limit: int = DEFAULT_PAGE,
        cursor: str | None = None,
    ) -> AttemptListOut:
        """Attempts in one status, oldest change first (the attention list)."""
        return attempts.list_attempts(
            self.wiring,
            self._as(Role.ADMIN),
            _enum(AttemptStatus, status, "status"),
            limit=limit,
            cursor=cursor,
        )

    def events(self, attempt_id: str) -> AttemptEventsOut:
        """The attempt's redacted, hash-verified event history."""
        return attempts.attempt_events(self.wiring, self._as(Role.ADMIN), attempt_id)

    def reconcile(self, attempt_id: str, *, expected_revision: int) -> AttemptOut:
        """Run the attempt's registered read-only reconciler (``outcome_unknown``)."""
        body = parse(ReconcileIn, {"expected_revision": expected_revision})
        return attempts.reconcile(self.wiring, self._as(Role.ADMIN), attempt_id, body)

    def resolve(
        self,
        attempt_id: str,
        *,
        expected_revision: int,
        resolution: str,
        reason: str,
        receipt: Mapping[str, Any] | None = None,
    ) -> AttemptOut:
        """Settle ``outcome_unknown`` as ``effect_applied`` or ``no_effect``, with
        a reason; recorded as resolved by this ledger's subject. Never executes."""
        body = parse(
            ResolveIn,
            {
                "expected_revision": expected_revision,
                "resolution": resolution,
                "reason": reason,
                "receipt": receipt,
            },
        )
        return attempts.resolve(self.wiring, self._as(Role.ADMIN), attempt_id, body)

    # -- audit, webhooks, executors --------------------------------------------------

    def audit(self, attempt_id: str) -> dict[str, Any]:
        """An attempt's verified timeline with its proposal and directory context."""
        return audit.attempt_report(self.wiring, self._as(Role.ADMIN), attempt_id)

    def audit_digest(self) -> Digest:
        """A digest of every stream head (signed with LEDGER_AUDIT_SIGNING_KEY if set)."""
        return audit.digest(self.wiring, self._as(Role.ADMIN))

    def audit_verify(self, digest: Digest, *, since: Digest | None = None) -> Verdict:
        """Does today's ledger extend ``digest`` (with ``since``: does ``digest``
        extend that older one)? ``ok`` and a message naming what was found."""
        return audit.verify(self.wiring, self._as(Role.ADMIN), digest, since=since)

    def webhook_deliveries(
        self,
        status: DeliveryStatus | str = DeliveryStatus.FAILING,
        *,
        limit: int = DEFAULT_PAGE,
        cursor: str | None = None,
    ) -> DeliveryListOut:
        """Webhook delivery records in one status, oldest fact first."""
        return webhooks.list_deliveries(
            self.wiring,
            self._as(Role.ADMIN),
            _enum(DeliveryStatus, status, "status"),
            limit=limit,
            cursor=cursor,
        )

    def redeliver(self, delivery_id: str) -> DeliveryOut:
        """Make one webhook delivery pending again, due now."""
        return webhooks.redeliver(self.wiring, self._as(Role.ADMIN), delivery_id)

    def executors(self) -> list[RegistryEntry]:
        """The registered executor builds (capability, build digest, delivery mode, kind)."""
        return list_executors(self.wiring)


E = TypeVar("E", AttemptStatus, ProposalStatus, DeliveryStatus)


def _enum(kind: type[E], value: E | str, what: str) -> E:
    """A status given as its enum or its name; InvalidInput for any other."""
    try:
        return kind(value)
    except ValueError:
        raise InvalidInput(f"{what}: must be one of {', '.join(kind)}") from None
