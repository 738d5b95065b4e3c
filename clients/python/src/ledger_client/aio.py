"""The asynchronous client: the same operations as :class:`ledger_client.Client`, awaited."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, TypeVar

import httpx

from ledger_client import _core as core
from ledger_client import answers as a
from ledger_client import requests as r
from ledger_client.retry import Budget, RetryPolicy
from ledger_client.spec import SpecDigests, make_spec, pick_build

T = TypeVar("T")


class AsyncClient(core.Base):
    """An asyncio client of one ledger server, acting with one bearer token.

    ``base_url`` is the server's root (``http://127.0.0.1:8000``); ``token``
    a JWT string or a function returning the current one. Every POST carries
    an ``Idempotency-Key`` (a new 256-bit key per call, the same on each of
    its retries, or the one given as ``idempotency_key=``); retries follow
    ``retry`` (:class:`~ledger_client.retry.RetryPolicy`). Use it as a context
    manager (``async with``), or await :meth:`aclose`.
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: core.TokenSource = None,
        timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        http_client: httpx.AsyncClient | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        super().__init__(base_url, token=token, timeout=timeout, retry=retry)
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient()
        self._sleep = sleep

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool (unless it was given)."""
        if self._owns_http:
            await self._http.aclose()

    async def call(self, call: core.Call[T]) -> T:
        """Send one operation, retrying as the policy allows; the typed answer or an error."""
        key = core.key_for(call)
        budget = Budget(self.retry)
        while True:
            try:
                response = await self._http.request(**self.request_args(call, key))
            except httpx.TransportError as exc:
                verdict = core.judge_failure(call, exc)
            else:
                judged = core.judge_answer(call, response)
                if not isinstance(judged, core.Verdict):
                    return judged
                verdict = judged
            delay = budget.next_delay(verdict.retry_after) if verdict.retry else None
            if delay is None:
                raise verdict.error
            await self._sleep(delay)

    # -- proposer ----------------------------------------------------------------------

    async def executors(self) -> a.ExecutorListOut:
        """Every executor build the server hosts, newest first per capability."""
        return await self.call(core.get("/executors", a.ExecutorListOut))

    async def build_spec(
        self,
        capability: str,
        content: Mapping[str, Any],
        *,
        permission: str,
        effect: str,
        destination: str,
        digests: SpecDigests,
        sources: Iterable[str] = (),
        target: r.Target | None = None,
        expires_at: datetime | str | None = None,
    ) -> r.ProposalSpec:
        """A spec on the newest available build of ``capability`` (see ``ledger_client.spec``);
        it expires in 24 hours unless ``expires_at`` says otherwise."""
        build = pick_build(await self.executors(), capability)
        return make_spec(
            build,
            content,
            permission=permission,
            effect=effect,
            destination=destination,
            digests=digests,
            sources=sources,
            target=target,
            expires_at=expires_at,
        )

    async def propose(
        self,
        actor: str | r.Provenance,
        spec: r.ProposalSpec,
        *,
        lineage_id: str | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
    ) -> a.ProposalOut:
        """Store a proposal (with ``lineage_id``: its next version, superseding the last)."""
        actor_id = actor if isinstance(actor, str) else actor.actor_id
        call = core.propose(actor_id, spec, lineage_id, expected_version, idempotency_key)
        return await self.call(call)

    async def present(
        self,
        proposal: str | a.ProposalOut | a.ProposalViewOut,
        to: r.Provenance | None = None,
        *,
        identity_binding_id: str | None = None,
        channel_binding_id: str | None = None,
        conversation_key: str | None = None,
        version: int | None = None,
        ttl_seconds: int | None = None,
        idempotency_key: str | None = None,
        actor_id: str | None = None,
    ) -> a.PresentationOut:
        """A single-use presentation for ``to`` (or the three bindings given one by
        one); its token is in this answer only. ``actor_id``: a quorum member's
        own presentation (only for a version a policy asks a quorum for)."""
        bindings = core.bindings(to, identity_binding_id, channel_binding_id, conversation_key)
        call = core.present(proposal, version, *bindings, ttl_seconds, idempotency_key, actor_id)
        return await self.call(call)

    async def get_proposal(self, proposal_id: str) -> a.ProposalViewOut:
        """Versions, statuses, hashes, presentations (never tokens) and attempt ids."""
        return await self.call(
            core.get(f"/proposals/{core.segment(proposal_id)}", a.ProposalViewOut)
        )

    async def cancel(
        self,
        proposal: str | a.ProposalOut | a.ProposalViewOut,
        *,
        version: int | None = None,
        idempotency_key: str | None = None,
    ) -> a.ProposalViewOut:
        """Withdraw a presented version; no attempt can come from it afterwards."""
        return await self.call(core.cancel(proposal, version, idempotency_key))

    # -- channel -----------------------------------------------------------------------

    async def approve(self, token: str, *, provenance: r.Provenance | None = None) -> a.ApprovalOut:
        """Claim the proposal and queue its one attempt (never executes anything).
        ``provenance``: a channel service asserts who approved, for a binding of its
        own channel (a per-conversation channel token carries its own)."""
        asserted = None if provenance is None else r.ProvenanceIn.of(provenance)
        return await self.call(core.approve(r.ApprovalIn(token=token, provenance=asserted)))

    async def decline(self, token: str, *, provenance: r.Provenance | None = None) -> a.DeclineOut:
        """The actor says no: the proposal is declined, no attempt is made.
        ``provenance``: as for :meth:`approve`."""
        asserted = None if provenance is None else r.ProvenanceIn.of(provenance)
        return await self.call(core.decline(r.DeclineIn(token=token, provenance=asserted)))

    async def inbox(
        self,
        actor_id: str,
        *,
        status: str = "presented",
        limit: int | None = None,
        cursor: str | None = None,
    ) -> a.InboxOut:
        """An actor's proposals in one status (by default what it still has to approve)."""
        call = core.get(
            "/proposals", a.InboxOut, actor_id=actor_id, status=status, limit=limit, cursor=cursor
        )
        return await self.call(call)

    # -- attempts ----------------------------------------------------------------------

    async def attempt(self, attempt: str | a.ApprovalOut | a.AttemptOut) -> a.AttemptOut:
        """The redacted status of an attempt."""
        path = f"/execution-attempts/{core.segment(core.attempt_ref(attempt))}"
        return await self.call(core.get(path, a.AttemptOut))

    async def wait(
        self, attempt: str | a.ApprovalOut | a.AttemptOut, *, timeout: float = 60.0
    ) -> a.AttemptOut:
        """The status once the attempt is settled, or at ``timeout`` seconds with its
        status then (check ``.settled``): long polls of at most 30 s each."""
        attempt_id = core.attempt_ref(attempt)
        deadline = self.retry.clock() + timeout
        while True:
            remaining = deadline - self.retry.clock()
            seconds = core.wait_seconds(remaining)
            answer = await self.call(core.wait_call(attempt_id, seconds, self.timeout))
            if answer.settled or deadline - self.retry.clock() <= 0:
                return answer

    async def attempts(
        self, status: str, *, limit: int | None = None, cursor: str | None = None
    ) -> a.AttemptListOut:
        """Attempts in one status, oldest change first (admin)."""
        call = core.get(
            "/execution-attempts", a.AttemptListOut, status=status, limit=limit, cursor=cursor
        )
        return await self.call(call)

    async def reconcile(self, attempt_id: str, *, expected_revision: int) -> a.AttemptOut:
        """Run the attempt's registered read-only reconciler (admin)."""
        return await self.call(core.reconcile(attempt_id, expected_revision))

    async def resolve(
        self,
        attempt_id: str,
        *,
        expected_revision: int,
        resolution: str,
        reason: str,
        receipt: dict[str, Any] | None = None,
    ) -> a.AttemptOut:
        """Settle ``outcome_unknown``: ``effect_applied`` or ``no_effect`` (admin)."""
        call = core.resolve(attempt_id, expected_revision, resolution, reason, receipt)
        return await self.call(call)

    # -- directory (admin) -------------------------------------------------------------

    async def put_actor(
        self, actor_id: str, *, enabled: bool = True, groups: list[str] | None = None
    ) -> a.ActorOut:
        """Create, enable or disable an actor; ``groups`` are what policies see of it."""
        path = core.directory("actors", actor_id)
        return await self.call(
            core.put(path, a.ActorOut, r.ActorIn(enabled=enabled, groups=groups))
        )

    async def put_identity_binding(
        self, binding_id: str, *, actor_id: str, channel: str, external_id: str, active: bool = True
    ) -> a.IdentityBindingOut:
        """Bind an actor to one external identity on one channel."""
        body = r.IdentityBindingIn(actor_id, channel, external_id, active)
        path = core.directory("identity-bindings", binding_id)
        return await self.call(core.put(path, a.IdentityBindingOut, body))

    async def put_channel_binding(
        self, binding_id: str, *, conversation_key: str, channel: str, active: bool = True
    ) -> a.ChannelBindingOut:
        """Bind one conversation on one channel as a place approvals may come from."""
        body = r.ChannelBindingIn(conversation_key, channel, active)
        path = core.directory("channel-bindings", binding_id)
        return await self.call(core.put(path, a.ChannelBindingOut, body))

    async def put_grant(
        self, actor_id: str, permission: str, *, granted: bool = True
    ) -> a.GrantOut:
        """Grant or revoke one catalogue permission."""
        path = core.directory("actors", actor_id) + "/permissions/" + core.segment(permission)
        return await self.call(core.put(path, a.GrantOut, r.GrantIn(granted=granted)))

    async def put_executor_build(
        self, capability: str, build_digest: str, *, delivery_mode: str, available: bool = True
    ) -> a.ExecutorBuildOut:
        """Allow (or withdraw) one exact executor build."""
        path = core.directory("executor-builds", capability, build_digest)
        body = r.ExecutorBuildIn(delivery_mode=delivery_mode, available=available)
        return await self.call(core.put(path, a.ExecutorBuildOut, body))

    async def put_target(self, target_id: str, *, revision: str) -> a.TargetOut:
        """Set a target's current revision."""
        path = core.directory("targets", target_id)
        return await self.call(core.put(path, a.TargetOut, r.TargetIn(revision=revision)))

    # -- policies and standing grants (docs/policies.md) -------------------------------

    async def policies(self) -> a.PolicySetOut:
        """The policy set: its version, the digest a spec's ``policy_digest`` names
        (``None`` without policies), its policies and, for an admin, its text."""
        return await self.call(core.get("/policies", a.PolicySetOut))

    async def apply_policies(
        self, text: str, *, expected_version: int | None = None
    ) -> a.PolicySetOut:
        """Replace the Cedar policy set (admin; empty text removes every policy),
        only while it is at ``expected_version`` when given (0: none yet)."""
        return await self.call(core.apply_policies(text, expected_version))

    async def grant(
        self,
        actor_id: str | None = None,
        *,
        capability: str,
        max_uses: int,
        expires_at: datetime | str,
        destination: str | None = None,
        effect: str | None = None,
        conditions: Iterable[r.ConditionIn | Mapping[str, Any]] = (),
        provenance: r.Provenance | None = None,
    ) -> a.StandingGrantOut:
        """A standing grant ("allow always"): an admin names ``actor_id``, a channel
        grants for its own actor (a channel service gives ``provenance``)."""
        bounds = (destination, effect, conditions)
        call = core.grant(actor_id, provenance, capability, max_uses, expires_at, bounds)
        return await self.call(call)

    async def standing_grants(self, actor_id: str) -> a.StandingGrantListOut:
        """An actor's standing grants with their uses and state, oldest first."""
        return await self.call(
            core.get("/standing-grants", a.StandingGrantListOut, actor_id=actor_id)
        )

    async def standing_grant(self, grant_id: str) -> a.StandingGrantOut:
        """One standing grant (another actor's is the same 404 as a missing one)."""
        path = f"/standing-grants/{core.segment(grant_id)}"
        return await self.call(core.get(path, a.StandingGrantOut))

    async def revoke_grant(
        self, grant_id: str, *, provenance: r.Provenance | None = None
    ) -> a.StandingGrantOut:
        """Revoke a standing grant: it approves nothing more (revoking twice is a no-op)."""
        return await self.call(core.revoke_grant(grant_id, provenance))
