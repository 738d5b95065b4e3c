"""Test cases for a policy set: what ``ledger policies test FILE --cases CASES`` runs.

A case describes one proposal as the policies see it (the actor and its
groups, the capability, effect, permission, destination, optional target,
content, and the moment) and the verdict it must get: ``auto_approve``,
``denied`` or ``human``, optionally by which policy. Cases come as a TOML file
of ``[[case]]`` tables or a JSON list (or ``{"cases": [...]}``).
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from domain.errors import InvalidInput
from domain.policy import (
    CompiledPolicies,
    PolicyDecision,
    PolicyRequest,
    Verdict,
    content_fields,
    evaluate,
)
from domain.spec import UtcTimestamp, describe_validation_error


class Target(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    base_revision: str = "r1"


class PolicyCase(BaseModel):
    """One proposal and the verdict the policy set must give it."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, Field(min_length=1, max_length=200)]
    actor: Annotated[str, Field(min_length=1, max_length=128)] = "alice"
    groups: list[str] = Field(default_factory=list)
    capability: Annotated[str, Field(min_length=1, max_length=64)]
    effect: Annotated[str, Field(min_length=1, max_length=64)] = "create"
    permission: Annotated[str, Field(min_length=1, max_length=64)] = "tasks.write"
    destination: Annotated[str, Field(min_length=1, max_length=256)] = "default"
    target: Target | None = None
    content: dict[str, Any] = Field(default_factory=dict)
    at: UtcTimestamp | None = None
    expect: Verdict
    policy: str | None = None

    def request(self, now: datetime) -> PolicyRequest:
        return PolicyRequest(
            actor_id=self.actor,
            groups=tuple(sorted(set(self.groups))),
            capability=self.capability,
            permission=self.permission,
            effect=self.effect,
            destination=self.destination,
            content=content_fields(self.content),
            at=self.at or now,
            target_id=self.target.id if self.target else None,
            base_revision=self.target.base_revision if self.target else None,
        )


@dataclass(frozen=True)
class CaseResult:
    """A case, the decision it got, and whether that is the expected one."""

    case: PolicyCase
    decision: PolicyDecision

    @property
    def passed(self) -> bool:
        if self.decision.verdict is not self.case.expect:
            return False
        return self.case.policy is None or self.case.policy in self.decision.policy_ids

    def line(self) -> str:
        got = self.decision.verdict.value
        if self.decision.policy_ids:
            got += " by " + ", ".join(self.decision.policy_ids)
        if self.decision.errors:
            got += f" ({self.decision.errors} evaluation error(s))"
        if self.passed:
            return f"ok    {self.case.name}: {got}"
        wanted = self.case.expect.value + (f" by {self.case.policy}" if self.case.policy else "")
        return f"FAIL  {self.case.name}: expected {wanted}, got {got}"


def parse_cases(text: str, *, toml: bool) -> list[PolicyCase]:
    """Cases from a TOML (``[[case]]``) or JSON document; InvalidInput names what is wrong."""
    try:
        data: Any = tomllib.loads(text) if toml else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"cases: not valid {'TOML' if toml else 'JSON'}: {exc}") from None
    raw = data.get("case", data.get("cases")) if isinstance(data, dict) else data
    if not isinstance(raw, list) or not raw:
        raise InvalidInput("cases: expected a non-empty list of cases ([[case]] tables)")
    cases = []
    for number, item in enumerate(raw, 1):
        try:
            cases.append(PolicyCase.model_validate(item))
        except ValidationError as exc:
            raise InvalidInput(f"case {number}: {describe_validation_error(exc)}") from None
    return cases


def run_cases(
    policies: CompiledPolicies, cases: list[PolicyCase], now: datetime | None = None
) -> list[CaseResult]:
    moment = now or datetime.now(UTC)
    return [CaseResult(case, evaluate(policies, case.request(moment))) for case in cases]
