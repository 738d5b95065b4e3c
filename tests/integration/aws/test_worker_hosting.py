"""The worker function leases only what it hosts (I11), from the stream and from
the recovery schedule alike, and reports what waits for a worker with its build."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from adapters.aws_lambda import worker
from adapters.bootstrap import Ledger
from domain.attempt import AttemptStatus
from tests.support.aws_lambda import FakeLambdaContext, StreamTap, metric_total, use_ledger
from tests.support.sam_template import filter_patterns, load_template, passes
from tests.support.worlds.builds import allow_v2, approved_v2, registry_with
from tests.support.worlds.execution import ExecutionWorld

pytestmark = pytest.mark.dynamodb


def test_a_function_without_the_build_leaves_it_due_for_one_that_has_it(
    monkeypatch: pytest.MonkeyPatch,
    ledger: Ledger,
    world: ExecutionWorld,
    stream: StreamTap,
    context: FakeLambdaContext,
    capsys: pytest.CaptureFixture[str],
) -> None:
    allow_v2(world)
    attempt_id = approved_v2(world, "provider_idempotency")
    patterns = filter_patterns(load_template()["Resources"]["WorkerFunction"], "QueuedAttempts")
    (queued,) = [r for r in stream.records() if passes(patterns, r)]
    ledger.projector.project_attempt(attempt_id)

    # This function hosts v1 only: the record is acknowledged, nothing is written.
    assert worker.handler({"Records": [queued]}, context) == {"batchItemFailures": []}
    answer = worker.handler({"mode": "recovery"}, context)
    assert answer["outcomes"] == {"not_hosted": 1} and answer["waiting_for_build"] == 0
    assert world.topics(attempt_id) == ["Queued"]
    out = capsys.readouterr().out
    assert metric_total(out, "Attempts", outcome="not_hosted") == 2

    world.clock.advance(ledger.settings.waiting_for_build_seconds + 1)
    answer = worker.handler({"mode": "recovery"}, context)
    assert answer["waiting_for_build"] == 1
    assert metric_total(capsys.readouterr().out, "AttemptsWaitingForBuild") == 1

    # The new version of the function hosts v1 and v2: the next tick runs it once.
    hosting: Any = registry_with(world, v1=True, v2=True)
    use_ledger(monkeypatch, dataclasses.replace(ledger, registry=hosting))
    assert worker.handler({"mode": "recovery"}, context)["outcomes"] == {"succeeded": 1}
    assert world.attempt(attempt_id).status is AttemptStatus.SUCCEEDED
    assert world.effects.effect_count(world.attempt(attempt_id).idempotency_key) == 1
