"""A verdict is asked of Cedar once per policy set and question
(``domain.services.policy_decisions.remembered``), and never answered for a
question that differs in anything the verdict depends on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from domain.directory import POLICY_SET_RECORD_ID
from domain.policy import PolicyDecision, Verdict, compiled, normalized_text
from domain.services import policy_decisions
from domain.services.policy_decisions import decide
from domain.services.read_cache import DirectorySnapshot
from domain.spec import parse_spec
from tests.support.worlds.approval import CAPABILITY, base_spec

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
FLAG = f"""
@id("flagged")
@auto_approve
permit (principal, action == Action::"{CAPABILITY}", resource)
when {{ context.content has flag && context.content.flag == true }};
"""
BEFORE_NOON = f"""
@id("mornings")
@auto_approve
permit (principal, action == Action::"{CAPABILITY}", resource)
when {{ context.now < datetime("2026-05-01T12:00:00Z") }};
"""


def snapshot(text: str) -> DirectorySnapshot:
    normalized = normalized_text(text)
    digest = compiled(normalized).digest
    return DirectorySnapshot.of(POLICY_SET_RECORD_ID, 1, {"text": normalized, "digest": digest})


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every question that reached Cedar."""
    seen: list[object] = []
    real = policy_decisions.evaluate

    def counted(policies: object, request: object) -> PolicyDecision:
        seen.append(request)
        return real(policies, request)  # type: ignore[arg-type]

    monkeypatch.setattr(policy_decisions, "evaluate", counted)
    return seen


def verdict(
    text: str, content: dict[str, object], at: datetime = NOW, actor: str = "al"
) -> Verdict:
    spec = parse_spec(base_spec(content=content))
    return decide(snapshot(text), actor, ("ops",), spec, at).verdict


def test_the_same_question_of_the_same_set_reaches_cedar_once(calls: list[object]) -> None:
    content = {"title": "memo once", "flag": True}
    answers = [verdict(FLAG, content, NOW + timedelta(seconds=i)) for i in range(3)]
    assert answers == [Verdict.AUTO_APPROVE] * 3
    assert len(calls) == 1  # no policy reads the time: one question
    assert verdict(FLAG, content, actor="bo") is Verdict.AUTO_APPROVE
    assert verdict(FLAG.replace("flagged", "flagged-2"), content) is Verdict.AUTO_APPROVE
    assert len(calls) == 3  # another actor, another set: asked again


def test_a_value_keeps_its_type_in_the_question(calls: list[object]) -> None:
    assert verdict(FLAG, {"title": "memo typed", "flag": True}) is Verdict.AUTO_APPROVE
    # 1 == True in Python; in Cedar a Long is no Boolean: a person decides
    assert verdict(FLAG, {"title": "memo typed", "flag": 1}) is Verdict.HUMAN
    assert len(calls) == 2


def test_a_set_that_reads_the_time_is_asked_at_each_moment(calls: list[object]) -> None:
    assert not compiled(normalized_text(FLAG)).reads_now
    assert compiled(normalized_text(BEFORE_NOON)).reads_now
    content = {"title": "memo time"}
    assert verdict(BEFORE_NOON, content, NOW - timedelta(minutes=1)) is Verdict.AUTO_APPROVE
    assert verdict(BEFORE_NOON, content, NOW) is Verdict.HUMAN
    assert verdict(BEFORE_NOON, content, NOW) is Verdict.HUMAN
    assert len(calls) == 2  # the same millisecond again: remembered
