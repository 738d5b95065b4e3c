"""Every write path converges after an ambiguous DynamoDB request (ministack).

Each path's own write request is hit by exactly one fault: *not sent* (the
request never reaches DynamoDB) or *lost response* (DynamoDB applied it, the
answer timed out). Two ways to converge are proven for each:

- ``recorder``: the recorder's own retry resends the request (a transaction
  with the same ``ClientRequestToken``, a conditional put checked against the
  stored item), so the operation succeeds in the same call;
- ``caller``: the retry budget is one request, so the operation fails with
  ``StoreUnavailable`` (after the write may have landed) and whoever called
  does what it does after an outage: the HTTP client repeats the request, the
  stream redelivers, recovery ticks, the projector retries.

Either way: every stream passes the chaos oracle (no duplicate or illegal
event), the transition happened exactly once, and nothing was lost.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from adapters.dynamodb.client import Retrier
from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.dynamodb.views import DynamoDBViewStore
from adapters.executors.fake import register_fakes
from adapters.executors.registry import StaticExecutorRegistry
from adapters.store import LedgerStore
from domain.attempt import ExecutionAttempt
from domain.directory import DirectoryKind, DirectoryRecord, actor_record_id
from domain.errors import StaleVersion, StoreUnavailable
from domain.ports import Commit, DueWork
from domain.proposal import Proposal
from domain.services.approval import approve
from domain.services.directory import put_record
from domain.services.execution import CrashPoint, SimulatedCrash
from domain.services.proposals import propose
from domain.services.recovery import run_recovery
from domain.services.resolution import reconcile, resolve
from projections.projector import Projector
from projections.status import STATUS_VIEW, status_record
from tests.support.faults import LOST_RESPONSE, NOT_SENT, ScriptedFaultClient
from tests.support.stream_checks import check_attempt_stream
from tests.support.worlds.approval import base_spec, check_approval_invariants
from tests.support.worlds.execution import LEASE, CrashAt, ExecutionWorld

pytestmark = pytest.mark.dynamodb

RECORDER, CALLER = "recorder", "caller"


@dataclass
class Rig:
    """An execution world on a DynamoDB table whose client takes scripted faults."""

    world: ExecutionWorld
    client: ScriptedFaultClient
    recorder: DynamoDBLedgerRecorder
    views: DynamoDBViewStore

    @property
    def store(self) -> LedgerStore:
        return self.world.store

    @property
    def projector(self) -> Projector:
        return Projector(self.store, self.views)

    def attempt(self, attempt_id: str) -> ExecutionAttempt:
        return self.world.attempt(attempt_id)

    def settle(self, attempt_id: str, rounds: int = 8) -> ExecutionAttempt:
        """What the system does after an outage: redeliver, then recovery ticks."""
        self.world.worker().process(attempt_id)
        for _ in range(rounds):
            attempt = self.attempt(attempt_id)
            if attempt.is_terminal or attempt.status.value == "outcome_unknown":
                return attempt
            self.world.clock.advance(LEASE + 1)
            run_recovery(self.world.worker())
        return self.attempt(attempt_id)


@pytest.fixture
def rig(dynamodb_client: Any, dynamodb_table_name: str) -> Rig:
    client = ScriptedFaultClient(dynamodb_client)
    retrier = Retrier(sleep=lambda _: None)
    recorder = DynamoDBLedgerRecorder(dynamodb_table_name, client, retrier=retrier)
    registry = StaticExecutorRegistry()
    effects = register_fakes(registry)
    world = ExecutionWorld(LedgerStore(recorder), registry=registry, effects=effects)
    views = DynamoDBViewStore(client, dynamodb_table_name, retrier=retrier)
    return Rig(world, client, recorder, views)


# -- which request is the write under test ----------------------------------------


def _topics(kwargs: dict[str, Any]) -> list[str]:
    items = (
        [kwargs["Item"]]
        if "Item" in kwargs
        else [
            action["Put"]["Item"] for action in kwargs.get("TransactItems", []) if "Put" in action
        ]
    )
    return [item["topic"]["S"] for item in items if "topic" in item]


def writes(topic: str) -> Callable[[dict[str, Any]], bool]:
    """The request that appends an event of this type."""
    return lambda kwargs: any(t.endswith(f".{topic}") for t in _topics(kwargs))


def only_due_work(kwargs: dict[str, Any]) -> bool:
    actions = kwargs.get("TransactItems", [])
    return bool(actions) and all(
        "Delete" in a and a["Delete"]["Key"]["pk"]["S"].startswith("due#") for a in actions
    )


def view_write(kwargs: dict[str, Any]) -> bool:
    """A status row's write: with its find rows in one transaction, or alone."""
    items = [kwargs["Item"]] if "Item" in kwargs else []
    items += [a["Put"]["Item"] for a in kwargs.get("TransactItems", []) if "Put" in a]
    return any(item["pk"]["S"].startswith(f"view#{STATUS_VIEW}#") for item in items)


# -- the write paths ------------------------------------------------------------------


def approved(rig: Rig, mode: str = "provider_idempotency", simulate: str = "success") -> str:
    return rig.world.approved(mode, simulate=simulate)


def unknown_outcome(rig: Rig, mode: str, simulate: str) -> str:
    attempt_id = approved(rig, mode, simulate)
    rig.world.worker().process(attempt_id)
    assert rig.attempt(attempt_id).status.value == "outcome_unknown"
    return attempt_id


def topics(rig: Rig, stream_id: str) -> list[str]:
    return [e.topic.rsplit(".", 1)[-1] for e in rig.store.read_stream(stream_id)]


def oracle(rig: Rig, attempt_id: str) -> None:
    events, bad = rig.store.audit_events(attempt_id)
    assert bad is None
    check_attempt_stream(attempt_id, events, rig.world.worker().policy)


@dataclass(frozen=True)
class WritePath:
    """One write path: set it up, make the write, converge after an outage, check."""

    name: str
    operation: str
    target: Callable[[dict[str, Any]], bool]
    prepare: Callable[[Rig], Any]
    act: Callable[[Rig, Any], Any]
    converge: Callable[[Rig, Any], Any]
    check: Callable[[Rig, Any, Any], None]


def _directory_check(rig: Rig, _: Any, __: Any) -> None:
    assert topics(rig, actor_record_id("carol")) == ["Registered"]
    record = rig.store.get(DirectoryRecord, actor_record_id("carol"))
    assert record is not None and record.flag("enabled")


def _put_carol(rig: Rig, _: Any) -> Any:
    return put_record(
        rig.store,
        rig.world.clock,
        kind=DirectoryKind.ACTOR,
        record_id=actor_record_id("carol"),
        values={"enabled": True},
    )


def _propose_check(rig: Rig, _: Any, proposal_id: str) -> None:
    """A repeated POST creates a lineage of its own (ids are random, there is no
    request key); a lost first attempt leaves either nothing or one lineage with
    one event that nothing refers to."""
    assert topics(rig, proposal_id) == ["Proposed"]
    for created in rig.world.tokens.proposal_ids:
        assert topics(rig, created) in ([], ["Proposed"])


def _revise(rig: Rig, proposal_id: str) -> int:
    return propose(
        rig.world.ctx,
        actor_id="alice",
        spec_data=base_spec(destination="inbox"),
        lineage_id=proposal_id,
        expected_version=1,
    ).version


def _revise_again(rig: Rig, proposal_id: str) -> int | str:
    """The client repeats the revision after a 503."""
    try:
        return _revise(rig, proposal_id)
    except StaleVersion:
        return "stale_version"


def _revise_check(rig: Rig, proposal_id: str, version: int | str) -> None:
    """Exactly one Revised, carrying the requested spec. A retry of a revision that
    did land answers 409 stale_version (the revision is keyed by the expected
    version only, so an identical revision by someone else is stale too)."""
    assert topics(rig, proposal_id) == ["Proposed", "Revised"]
    proposal = rig.store.get(Proposal, proposal_id)
    assert proposal is not None and proposal.current_version == 2
    assert proposal.versions[2]["spec"]["destination"] == "inbox"
    if version == "stale_version":
        assert rig.client.injected[("transact_write_items", LOST_RESPONSE)] == 1
    else:
        assert version == 2


def _present_check(rig: Rig, proposal_id: str, token: str) -> None:
    assert set(topics(rig, proposal_id)) == {"Proposed", "Presented"}
    attempt_id = approve(rig.world.ctx, token=token, provenance=rig.world.who).attempt_id
    assert topics(rig, attempt_id) == ["Queued"]
    check_approval_invariants(rig.store, [proposal_id], rig.world.clock.now())


def _approval_prepare(rig: Rig) -> tuple[str, str]:
    proposal_id = rig.world.propose()
    return proposal_id, rig.world.present(proposal_id).token


def _approve(rig: Rig, prepared: tuple[str, str]) -> str:
    return approve(rig.world.ctx, token=prepared[1], provenance=rig.world.who).attempt_id


def _approval_check(rig: Rig, prepared: tuple[str, str], attempt_id: str) -> None:
    assert topics(rig, attempt_id) == ["Queued"]
    assert topics(rig, prepared[0]) == ["Proposed", "Presented", "Claimed"]
    due = {d.attempt_id for d in rig.store.due_work(rig.world.clock.now(), 100).items}
    assert attempt_id in due
    check_approval_invariants(rig.store, [prepared[0]], rig.world.clock.now())


def _worker_prepare(rig: Rig) -> str:
    return approved(rig)


def _process(rig: Rig, attempt_id: str) -> Any:
    return rig.world.worker().process(attempt_id)


def _succeeded_once(rig: Rig, attempt_id: str, _: Any) -> None:
    attempt = rig.settle(attempt_id)
    assert attempt.status.value == "succeeded"
    assert rig.world.effects.effect_count(attempt.idempotency_key) == 1
    assert topics(rig, attempt_id).count("ResultRecorded") == 1
    oracle(rig, attempt_id)
    assert attempt_id not in {
        d.attempt_id for d in rig.store.due_work(rig.world.clock.now(), 100).items
    }


def _expired_lease(rig: Rig) -> str:
    attempt_id = approved(rig)
    with pytest.raises(SimulatedCrash):
        rig.world.worker(CrashAt(CrashPoint.AFTER_LEASE)).process(attempt_id)
    rig.world.clock.advance(LEASE + 1)
    return attempt_id


def _recover(rig: Rig, _: Any) -> Any:
    return run_recovery(rig.world.worker())


def _reconcile_prepare(rig: Rig) -> tuple[str, int]:
    attempt_id = unknown_outcome(rig, "correlation_lookup", "unsafe_receipt")
    return attempt_id, rig.attempt(attempt_id).revision


def _reconcile(rig: Rig, prepared: tuple[str, int]) -> Any:
    return reconcile(rig.world.ctx, attempt_id=prepared[0], expected_revision=prepared[1])


def _reconcile_check(rig: Rig, prepared: tuple[str, int], _: Any) -> None:
    attempt = rig.attempt(prepared[0])
    assert attempt.status.value == "succeeded"
    assert attempt.result is not None and attempt.result["source"] == "reconciler"
    assert topics(rig, prepared[0]).count("ResultRecorded") == 2  # unknown, then reconciled
    oracle(rig, prepared[0])


def _resolve_prepare(rig: Rig) -> tuple[str, int]:
    attempt_id = unknown_outcome(rig, "operator_reconciliation_only", "timeout_after_effect")
    return attempt_id, rig.attempt(attempt_id).revision


def _resolve(rig: Rig, prepared: tuple[str, int]) -> Any:
    return resolve(
        rig.world.ctx,
        attempt_id=prepared[0],
        expected_revision=prepared[1],
        outcome="effect_applied",
        reason="seen in the provider console",
        resolved_by="ops",
    )


def _resolve_check(rig: Rig, prepared: tuple[str, int], _: Any) -> None:
    attempt = rig.attempt(prepared[0])
    assert attempt.status.value == "manually_resolved"
    assert topics(rig, prepared[0]).count("ManuallyResolved") == 1
    oracle(rig, prepared[0])


def _stale_due(rig: Rig) -> str:
    attempt_id = approved(rig)
    rig.world.worker().process(attempt_id)
    rig.store.commit(Commit(due=[DueWork(attempt_id, rig.world.clock.now())]))
    return attempt_id


def _stale_due_check(rig: Rig, attempt_id: str, _: Any) -> None:
    assert rig.attempt(attempt_id).status.value == "succeeded"
    assert topics(rig, attempt_id) == ["Queued", "Leased", "DispatchStarted", "ResultRecorded"]
    horizon = rig.world.clock.now()
    assert attempt_id not in {d.attempt_id for d in rig.store.due_work(horizon, 100).items}


def _project(rig: Rig, attempt_id: str) -> Any:
    return rig.projector.project_attempt(attempt_id)


def _put_status_row(rig: Rig, attempt_id: str) -> Any:
    return rig.views.put_views([status_record(rig.attempt(attempt_id))], ())


def _view_check(rig: Rig, attempt_id: str, moved: Any) -> None:
    view = rig.views.get_view(STATUS_VIEW, attempt_id)
    attempt = rig.attempt(attempt_id)
    assert view is not None
    assert (view.version, dict(view.data)) == (attempt.version, dict(status_record(attempt).data))


# A lone event travels with its stream's head-index item (audit digests), so
# every write path through the store is a transaction.
PATHS = [
    WritePath(
        "directory_put",
        "transact_write_items",
        writes("Registered"),
        lambda rig: None,
        _put_carol,
        _put_carol,
        _directory_check,
    ),
    WritePath(
        "propose",
        "transact_write_items",
        writes("Proposed"),
        lambda rig: None,
        lambda rig, _: rig.world.propose(),
        lambda rig, _: rig.world.propose(),
        _propose_check,
    ),
    WritePath(
        "revise",
        "transact_write_items",
        writes("Revised"),
        lambda rig: rig.world.propose(),
        _revise,
        _revise_again,
        _revise_check,
    ),
    WritePath(
        "present",
        "transact_write_items",
        writes("Presented"),
        lambda rig: rig.world.propose(),
        lambda rig, pid: rig.world.present(pid).token,
        lambda rig, pid: rig.world.present(pid).token,
        _present_check,
    ),
    WritePath(
        "approval",
        "transact_write_items",
        writes("Queued"),
        _approval_prepare,
        _approve,
        _approve,
        _approval_check,
    ),
    WritePath(
        "lease",
        "transact_write_items",
        writes("Leased"),
        _worker_prepare,
        _process,
        _process,
        _succeeded_once,
    ),
    WritePath(
        "dispatch_marker",
        "transact_write_items",
        writes("DispatchStarted"),
        _worker_prepare,
        _process,
        _process,
        _succeeded_once,
    ),
    WritePath(
        "result",
        "transact_write_items",
        writes("ResultRecorded"),
        _worker_prepare,
        _process,
        _process,
        _succeeded_once,
    ),
    WritePath(
        "requeue",
        "transact_write_items",
        writes("Requeued"),
        _expired_lease,
        _recover,
        _recover,
        _succeeded_once,
    ),
    WritePath(
        "reconcile",
        "transact_write_items",
        writes("ResultRecorded"),
        _reconcile_prepare,
        _reconcile,
        _reconcile,
        _reconcile_check,
    ),
    WritePath(
        "resolve",
        "transact_write_items",
        writes("ManuallyResolved"),
        _resolve_prepare,
        _resolve,
        _resolve,
        _resolve_check,
    ),
    WritePath(
        "due_work_only",
        "transact_write_items",
        only_due_work,
        _stale_due,
        _recover,
        _recover,
        _stale_due_check,
    ),
    WritePath(
        "view_write",
        "transact_write_items",
        view_write,
        _worker_prepare,
        _project,
        _project,
        _view_check,
    ),
    WritePath(
        "lone_view_write",
        "put_item",
        view_write,
        _worker_prepare,
        _put_status_row,
        _put_status_row,
        _view_check,
    ),
]


@pytest.mark.parametrize("converge_by", [RECORDER, CALLER])
@pytest.mark.parametrize("fault", [NOT_SENT, LOST_RESPONSE])
@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_write_path_converges_after_an_ambiguous_request(
    rig: Rig, path: WritePath, fault: str, converge_by: str
) -> None:
    prepared = path.prepare(rig)
    calls_before = rig.world.effects.call_count()
    rig.client.arm(fault, path.operation, when=path.target)
    if converge_by == RECORDER:
        result = path.act(rig, prepared)
    else:
        rig.recorder.retrier.max_attempts = 1
        try:
            with pytest.raises(StoreUnavailable):
                path.act(rig, prepared)
        finally:
            rig.recorder.retrier.max_attempts = 8
        result = path.converge(rig, prepared)
    assert rig.client.pending == 0, "the write under test never ran"
    assert sum(rig.client.injected.values()) == 1
    path.check(rig, prepared, result)
    stored = [p for p in rig.world.tokens.proposal_ids if rig.store.get(Proposal, p) is not None]
    check_approval_invariants(rig.store, stored, rig.world.clock.now())
    assert rig.world.effects.max_effects_per_key() <= 1
    if path.name in ("reconcile", "resolve", "approval", "present", "propose", "revise"):
        assert rig.world.effects.call_count() == calls_before  # I6: never executes
