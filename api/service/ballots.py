"""How a proposal version is (or was) decided, and what waits for a member's vote.

``decision_of`` says, for one version, the approval kind (``single``,
``quorum``, ``policy``, ``grant``), the votes recorded (who, when), how many it
needs (``required``), who can still vote, and the fallback group of an
escalated version (``escalated_to``). A claimed version says what its claim
recorded; a version still presented says what the policy set in force asks
now (the same decision the next vote is judged by), read through the read
cache: a page of rows costs the policy set once and one actor record each.

``member_ballots`` lists the proposals waiting for one quorum member's vote
(``projections.ballots``): a signed-in member sees their own, an admin any
member's. Ids, times and counts only (I10).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from adapters.bootstrap import Ledger
from api.http.schemas.proposals import InboxItemOut, InboxOut
from api.service.cursors import DEFAULT_PAGE, decode_cursor, encode_cursor, page_size
from api.service.principal import Principal, Role, require_role
from domain.approvals import ApprovalKind
from domain.directory import actor_record_id, validate_ident
from domain.errors import InvalidInput, InvalidPolicySet
from domain.proposal import Proposal, ProposalStatus
from domain.services.authorization import DirectoryReads
from domain.services.policy_decisions import decide, groups_of, policy_set_snapshot
from domain.services.quorum import member_rule
from domain.spec import stored_spec
from projections.ballots import list_ballots, votes_with_times, waiting_on
from projections.inbox import list_inbox

SINGLE = "single"
"""One person approves (the recorded kind ``human``)."""
KIND_WORDS = {
    ApprovalKind.HUMAN.value: SINGLE,
    ApprovalKind.QUORUM.value: "quorum",
    ApprovalKind.POLICY.value: "policy",
    ApprovalKind.GRANT.value: "standing grant",
}


def _claimed(proposal: Proposal, number: int, approval: dict[str, Any]) -> dict[str, Any]:
    record = proposal.versions[number]
    kind = str(approval.get("kind", ApprovalKind.HUMAN.value))
    recorded = {v["actor_id"]: v["at"] for v in votes_with_times(proposal, number)}
    votes = [
        {"actor_id": who, "at": recorded.get(who, record.get("approved_at"))}
        for who in approval.get("approvers", [])
    ]
    shown: dict[str, Any] = {
        "kind": KIND_WORDS.get(kind, kind),
        "votes": votes,
        "required": approval.get("required", 1 if kind == ApprovalKind.HUMAN.value else 0),
        "group": approval.get("group"),
        "waiting_on": [],
        "decided_at": record.get("approved_at"),
    }
    for name in ("policy_id", "policy_set_version", "grant_id", "use", "max_uses"):
        if approval.get(name) is not None:
            shown[name] = approval[name]
    return shown


def decision_of(
    ledger: Ledger, proposal: Proposal, number: int, now: datetime, reads: DirectoryReads
) -> dict[str, Any]:
    """How version ``number`` is decided (see the module docstring)."""
    record = proposal.versions[number]
    escalated_to = (record.get("escalated") or {}).get("group")
    approval = record.get("approval")
    if record["status"] == ProposalStatus.CLAIMED.value:
        claimed = approval or {"kind": ApprovalKind.HUMAN.value, "approvers": [proposal.actor_id]}
        return {**_claimed(proposal, number, claimed), "escalated_to": escalated_to}
    shown: dict[str, Any] = {
        "kind": SINGLE,
        "votes": votes_with_times(proposal, number),
        "required": 1,
        "group": None,
        "waiting_on": waiting_on(proposal, number) if record["status"] == "presented" else [],
        "escalated_to": escalated_to,
    }
    spec = stored_spec(record["spec"], record["payload_hash"])
    if spec is None:  # a stored spec that no longer reads: say nothing more
        return shown
    try:
        actor = reads.get(actor_record_id(proposal.actor_id))
        decision = decide(
            policy_set_snapshot(reads),
            proposal.actor_id,
            groups_of(actor) if actor is not None else (),
            spec,
            now,
        )
    except InvalidPolicySet:
        return shown | {"kind": "unknown (the policy set does not compile)"}
    rule = member_rule(decision, record)
    if rule is not None:
        shown |= {"kind": "quorum", "required": rule.required, "group": rule.group}
    return shown


def decisions_of(
    ledger: Ledger, rows: list[dict[str, Any]], now: datetime
) -> dict[tuple[str, int], dict[str, Any]]:
    """``decision_of`` for every (proposal id, version) the rows name."""
    reads = DirectoryReads(ledger.context, fresh=False)
    found: dict[tuple[str, int], dict[str, Any]] = {}
    for row in rows:
        key = (str(row["proposal_id"]), int(row["version"]))
        if key in found:
            continue
        proposal = ledger.store.get(Proposal, key[0])
        if proposal is not None and key[1] in proposal.versions:
            found[key] = decision_of(ledger, proposal, key[1], now, reads)
    return found


def own_inbox(
    ledger: Ledger,
    principal: Principal,
    status: ProposalStatus = ProposalStatus.PRESENTED,
    *,
    limit: int = DEFAULT_PAGE,
    cursor: str | None = None,
) -> InboxOut:
    """A signed-in member's own proposals in one status (what the proposal's
    actor approves alone), from the inbox projection."""
    require_role(principal, Role.ACTOR)
    actor_id = validate_ident(principal.subject, "actor_id", "query")
    rows, next_raw = list_inbox(
        ledger.views, actor_id, status, ledger.clock.now(), page_size(limit), decode_cursor(cursor)
    )
    items = [InboxItemOut.model_validate(row) for row in rows]
    return InboxOut(items=items, next_cursor=encode_cursor(next_raw))


def is_enabled_actor(ledger: Ledger, actor_id: object) -> bool:
    """Whether ``actor_id`` names an enabled actor of the directory (read fresh):
    who may open a member's console session."""
    if not isinstance(actor_id, str):
        return False
    try:
        actor_id = validate_ident(actor_id, "actor_id", "claim")
    except InvalidInput:
        return False
    found = DirectoryReads(ledger.context, fresh=True).get(actor_record_id(actor_id))
    return found is not None and found.flag("enabled")


def may_see_ballots(principal: Principal, member: str) -> bool:
    """Admins, and the member themself."""
    return principal.role is Role.ADMIN or (
        principal.role is Role.ACTOR and principal.subject == member
    )


def member_ballots(
    ledger: Ledger,
    principal: Principal,
    member: str,
    *,
    limit: int = DEFAULT_PAGE,
    cursor: str | None = None,
) -> tuple[list[dict[str, Any]], str | None]:
    """What waits for ``member``'s vote, soonest expiry first, and the next
    page's cursor. Anyone else's ballots read as an empty page."""
    require_role(principal, Role.ADMIN, Role.ACTOR)
    member = validate_ident(member, "actor_id", "query")
    after = decode_cursor(cursor)
    if not may_see_ballots(principal, member):
        return [], None
    rows, next_raw = list_ballots(ledger.views, member, ledger.clock.now(), page_size(limit), after)
    return [dict(row) for row in rows], encode_cursor(next_raw)
