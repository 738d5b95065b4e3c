"""Policies in Cedar: the policy set, what a proposal is evaluated as, and the verdict.

A policy set is Cedar text whose every policy carries ``@id("...")`` (a stable
name the answers cite). The verdict on one proposal (docs/policies.md):

- ``denied``: a ``forbid`` policy holds (forbid wins, whatever permits);
- ``auto_approve``: a ``permit`` marked ``@auto_approve`` holds, nothing
  forbids, and no policy failed to evaluate (an evaluation error, such as a
  missing attribute, never approves anything on its own);
- ``quorum``: a ``permit`` marked ``@quorum("M")`` and ``@group("name")``
  holds and nothing forbids: M distinct members of the group must approve
  (``domain.quorum``; the strictest such policy when several hold, and before
  any ``@auto_approve``);
- ``human``: anything else (Cedar's default deny included): a person decides,
  as without policies.

What a proposal is evaluated as (``PolicyRequest``): principal
``Actor::"<actor id>"`` with attribute ``groups`` (a set of strings) and every
group as a parent ``Group::"<group>"``; action ``Action::"<capability>"``;
resource ``Target::"<target id>"`` (attribute ``base_revision``, parent
``Destination::"<destination>"``) or, for an effect without a target,
``Destination::"<destination>"``; context ``effect``, ``permission``,
``destination``, ``content`` (the content fields, ``content_fields``) and
``now`` (a Cedar ``datetime``).

cedarpy is used like ``rfc8785`` is in ``domain.canonical``: a pure evaluator
(no I/O, no clock, no state), so the decision lives with the model. Only its
public API: ``PolicySet.from_str``, ``policies_to_json_str`` (the Cedar JSON
form, for each policy's effect and annotations), ``policies_from_json_str``,
``format_policies`` and ``is_authorized``.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import cedarpy

from domain.canonical import canonical_json
from domain.errors import InvalidPolicySet
from domain.escalation import EscalationRule, escalation_of, first_escalation
from domain.quorum import QuorumRule, quorum_of, strictest
from domain.spec import ProposalSpec

MAX_POLICY_TEXT_BYTES = 64 * 1024
"""A policy set's text, at most (its record's events stay far under the event limit)."""
MAX_POLICIES = 200
MAX_MESSAGE_CHARS = 400
ID_ANNOTATION = "id"
AUTO_APPROVE_ANNOTATION = "auto_approve"
POLICY_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]{0,63}")
DIGEST_LABEL = "execution-ledger/policy-set/v1"


class Effect(StrEnum):
    """A Cedar policy's effect."""

    PERMIT = "permit"
    FORBID = "forbid"


class Verdict(StrEnum):
    """What the policy set says about one proposal."""

    DENIED = "denied"
    AUTO_APPROVE = "auto_approve"
    QUORUM = "quorum"
    HUMAN = "human"


@dataclass(frozen=True)
class PolicyInfo:
    """One policy of a set: its ``@id``, effect, and whether it approves by itself."""

    id: str
    effect: Effect
    auto_approve: bool
    quorum: QuorumRule | None = None
    escalation: EscalationRule | None = None

    def as_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "id": self.id,
            "effect": self.effect.value,
            "auto_approve": self.auto_approve,
        }
        if self.quorum is not None:
            found |= {"quorum": self.quorum.required, "group": self.quorum.group}
        if self.escalation is not None:
            found["escalation"] = self.escalation.as_dict()
        return found


@dataclass(frozen=True)
class CompiledPolicies:
    """A validated policy set: its text, digest, policies and the parsed set."""

    text: str
    digest: str
    policies: tuple[PolicyInfo, ...]
    handle: Any = field(repr=False, compare=False)
    by_parser_id: Mapping[str, PolicyInfo] = field(repr=False, compare=False)
    forms: Mapping[str, Any] = field(repr=False, compare=False)
    """Each policy's Cedar JSON form by ``@id`` (what ``diff`` compares)."""
    reads_now: bool = True
    """Whether a policy may look at ``context.now``: False only when no policy's
    JSON form names ``now`` anywhere (then a verdict does not depend on the time)."""

    @property
    def empty(self) -> bool:
        """No policy: the ledger behaves as if no policy set were configured."""
        return not self.policies

    def ids(self) -> list[str]:
        return [p.id for p in self.policies]


def normalized_text(text: str) -> str:
    """NFC, ``\\n`` line ends, no trailing blank lines: what is stored and digested."""
    unified = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    return unified.rstrip() + "\n" if unified.strip() else ""


def policy_set_digest(text: str) -> str:
    """``sha256:`` over the canonical bytes of the label and the normalized text:
    what ``spec.policy_digest`` names when a policy set is configured."""
    data = canonical_json([DIGEST_LABEL, normalized_text(text)])
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _message(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text[:MAX_MESSAGE_CHARS] or type(exc).__name__


def compile_policies(text: str) -> CompiledPolicies:
    """Parse and check a policy set; ``InvalidPolicySet`` says what is wrong.

    Refused: text over 64 KiB or not valid Cedar, more than 200 policies, a
    template (``?principal`` / ``?resource``), a policy without ``@id`` or with
    an id that is not ``[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}``, two policies with
    one id, ``@auto_approve`` on a ``forbid`` or with a value."""
    if not isinstance(text, str):
        raise InvalidPolicySet("the policy set must be text")
    text = normalized_text(text)
    if len(text.encode("utf-8")) > MAX_POLICY_TEXT_BYTES:
        raise InvalidPolicySet(f"the policy set is larger than {MAX_POLICY_TEXT_BYTES} bytes")
    try:
        handle = cedarpy.PolicySet.from_str(text)
        est = json.loads(cedarpy.policies_to_json_str(text)) if text else {}
    except ValueError as exc:
        raise InvalidPolicySet(f"not valid Cedar: {_message(exc)}") from None
    if est.get("templates") or est.get("templateLinks"):
        raise InvalidPolicySet("templates (?principal, ?resource) are not supported")
    static: dict[str, Any] = est.get("staticPolicies") or {}
    if len(static) > MAX_POLICIES:
        raise InvalidPolicySet(f"more than {MAX_POLICIES} policies")
    infos: list[PolicyInfo] = []
    by_parser_id: dict[str, PolicyInfo] = {}
    forms: dict[str, Any] = {}
    for position, (parser_id, policy) in enumerate(
        sorted(static.items(), key=lambda kv: _position(kv[0]))
    ):
        info = _policy_info(position + 1, policy)
        if info.id in forms:
            raise InvalidPolicySet(f"policy id {info.id!r} is used twice")
        infos.append(info)
        by_parser_id[parser_id] = info
        forms[info.id] = policy
    return CompiledPolicies(
        text=text,
        digest=policy_set_digest(text),
        policies=tuple(infos),
        handle=handle,
        by_parser_id=by_parser_id,
        forms=forms,
        reads_now="now" in json.dumps(static),
    )


def _position(parser_id: str) -> int:
    digits = parser_id.removeprefix("policy")
    return int(digits) if digits.isdigit() else 0


def _policy_info(number: int, policy: Mapping[str, Any]) -> PolicyInfo:
    annotations: Mapping[str, Any] = policy.get("annotations") or {}
    policy_id = annotations.get(ID_ANNOTATION)
    if not isinstance(policy_id, str) or not policy_id:
        raise InvalidPolicySet(f'policy number {number} has no @id("...") annotation')
    if not POLICY_ID_PATTERN.fullmatch(policy_id):
        raise InvalidPolicySet(
            f"policy number {number}: its @id must be 1-64 letters, digits or _.:- "
            "(starting with a letter or digit)"
        )
    effect = Effect(policy["effect"])
    auto = AUTO_APPROVE_ANNOTATION in annotations
    if auto and annotations[AUTO_APPROVE_ANNOTATION] not in (None, ""):
        raise InvalidPolicySet(f"policy {policy_id!r}: @auto_approve takes no value")
    if auto and effect is Effect.FORBID:
        raise InvalidPolicySet(f"policy {policy_id!r}: @auto_approve marks permit policies only")
    quorum = quorum_of(policy_id, effect.value, annotations)
    escalation = escalation_of(policy_id, effect.value, annotations)
    return PolicyInfo(policy_id, effect, auto, quorum, escalation)


_COMPILED: OrderedDict[str, CompiledPolicies] = OrderedDict()
_COMPILED_LOCK = threading.Lock()
_COMPILED_MAX = 16


def compiled(text: str, digest: str | None = None) -> CompiledPolicies:
    """``compile_policies`` of a stored set, parsed once per digest (a small LRU):
    every proposal, approval and recheck evaluates the same few sets. ``digest``:
    the one stored beside the text (a stored text that does not match it is
    refused as ``InvalidPolicySet``)."""
    digest = digest or policy_set_digest(text)
    with _COMPILED_LOCK:
        held = _COMPILED.get(digest)
        if held is not None:
            _COMPILED.move_to_end(digest)
            return held
    fresh = compile_policies(text)
    if fresh.digest != digest:
        raise InvalidPolicySet("the stored policy set does not match its digest")
    with _COMPILED_LOCK:
        _COMPILED[digest] = fresh
        while len(_COMPILED) > _COMPILED_MAX:
            _COMPILED.popitem(last=False)
    return fresh


def content_fields(content: Mapping[str, Any]) -> dict[str, str | int | bool]:
    """The content fields a policy or a standing grant may look at.

    The one mapping from a spec's content to what decisions see: today every
    top-level string, integer and boolean (nested objects and lists are left
    out); a capability's content schema may narrow it to the fields it declares.
    """
    return {key: value for key, value in content.items() if isinstance(value, (str, int, bool))}


def cedar_datetime(moment: datetime) -> str:
    """UTC with milliseconds: the precision Cedar's ``datetime`` takes."""
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


@dataclass(frozen=True)
class PolicyRequest:
    """What one proposal is evaluated as (see the module docstring)."""

    actor_id: str
    groups: tuple[str, ...]
    capability: str
    permission: str
    effect: str
    destination: str
    content: Mapping[str, str | int | bool]
    at: datetime
    target_id: str | None = None
    base_revision: str | None = None

    @classmethod
    def of(
        cls, actor_id: str, groups: tuple[str, ...], spec: ProposalSpec, at: datetime
    ) -> PolicyRequest:
        return cls(
            actor_id=actor_id,
            groups=groups,
            capability=spec.capability,
            permission=spec.permission,
            effect=spec.effect,
            destination=spec.destination,
            content=content_fields(spec.content),
            at=at,
            target_id=spec.target.id if spec.target else None,
            base_revision=spec.target.base_revision if spec.target else None,
        )

    def cedar(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The Cedar request and its entities."""
        principal = {"type": "Actor", "id": self.actor_id}
        destination = {"type": "Destination", "id": self.destination}
        entities: list[dict[str, Any]] = [
            {
                "uid": principal,
                "attrs": {"groups": list(self.groups)},
                "parents": [{"type": "Group", "id": g} for g in self.groups],
            },
            {"uid": destination, "attrs": {}, "parents": []},
        ]
        resource = destination
        if self.target_id is not None:
            resource = {"type": "Target", "id": self.target_id}
            entities.append(
                {
                    "uid": resource,
                    "attrs": {"base_revision": self.base_revision or ""},
                    "parents": [destination],
                }
            )
        context = {
            "effect": self.effect,
            "permission": self.permission,
            "destination": self.destination,
            "content": dict(self.content),
            "now": {"__extn": {"fn": "datetime", "arg": cedar_datetime(self.at)}},
        }
        request = {
            "principal": principal,
            "action": {"type": "Action", "id": self.capability},
            "resource": resource,
            "context": context,
        }
        return request, entities


@dataclass(frozen=True)
class PolicyDecision:
    """The verdict, the policies it rests on (sorted ids) and how many errored."""

    verdict: Verdict
    policy_ids: tuple[str, ...] = ()
    errors: int = 0
    quorum: QuorumRule | None = None
    """For ``quorum``: how many members of which group must approve."""
    escalation: EscalationRule | None = None
    """For ``quorum`` and ``human``: where an unanswered approval escalates."""

    @property
    def policy_id(self) -> str | None:
        """The one policy an automatic approval is recorded as (the first id)."""
        return self.policy_ids[0] if self.policy_ids else None


NO_POLICIES = PolicyDecision(Verdict.HUMAN)
UNEVALUABLE = PolicyDecision(Verdict.DENIED, errors=1)
"""A proposal the policy set could not be evaluated on at all: refused."""
_POLICY_ERROR = re.compile(r"evaluating policy `[^`]+`")


def evaluate(policies: CompiledPolicies, request: PolicyRequest) -> PolicyDecision:
    """Evaluate one proposal against a policy set (module docstring for the rules)."""
    if policies.empty:
        return NO_POLICIES
    cedar_request, entities = request.cedar()
    try:
        result = cedarpy.is_authorized(cedar_request, policies.handle, entities)
    except (ValueError, TypeError):
        return UNEVALUABLE
    diagnostics = result.diagnostics
    if any(_POLICY_ERROR.search(e) is None for e in diagnostics.errors):
        # Not one policy's error (those Cedar skips) but the request's: no policy
        # was judged at all, so nothing can say it is not forbidden. Fail closed.
        return UNEVALUABLE
    matched = [policies.by_parser_id[r] for r in diagnostics.reasons if r in policies.by_parser_id]
    errors = len(diagnostics.errors)
    if result.decision is cedarpy.Decision.Deny:
        forbids = sorted(p.id for p in matched if p.effect is Effect.FORBID)
        if forbids:
            return PolicyDecision(Verdict.DENIED, tuple(forbids), errors)
        return PolicyDecision(Verdict.HUMAN, errors=errors)
    rule = strictest([p.quorum for p in matched if p.quorum is not None])
    escalation = first_escalation([p.escalation for p in matched])
    if result.decision is cedarpy.Decision.Allow and rule is not None:
        return PolicyDecision(Verdict.QUORUM, (rule.policy_id,), errors, rule, escalation)
    auto = sorted(p.id for p in matched if p.auto_approve)
    if result.decision is cedarpy.Decision.Allow and auto and errors == 0:
        return PolicyDecision(Verdict.AUTO_APPROVE, tuple(auto))
    return PolicyDecision(Verdict.HUMAN, errors=errors, escalation=escalation)
