"""A setting change of an ``http`` executor, done as docs/operations.md says, loses
nothing: 10 queued attempts and 10 open presentations bound to the old build
all run on it, new proposals are told the new one, on every store.

Changing ``timeout_seconds`` changes the build digest (as it must). Without the
procedure, before I11 held, every queued attempt became ``failed_safe`` and every
control answered the uniform 404; now they would wait, and the check says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from adapters.bootstrap import Ledger, build_ledger
from adapters.executors.rollover import Bound, compare
from adapters.settings import load_settings
from adapters.store import LedgerStore
from domain.attempt import AttemptStatus, ExecutionAttempt
from domain.directory import DirectoryKind, executor_build_record_id
from domain.errors import ExecutorBuildDraining
from domain.services.approval import approve
from domain.services.directory import put_record
from domain.services.proposals import present, propose
from domain.services.recovery import run_recovery
from tests.support.clocks import FixedClock
from tests.support.http_executors import TOKEN_VARIABLE
from tests.support.provider_fixtures import Provider
from tests.support.worlds.approval import World, base_spec

CAPABILITY = "tasks.create"


def entry(url: str, timeout: int, *, draining: bool = False) -> str:
    return (
        f'[[http]]\ncapability = "{CAPABILITY}"\ndelivery_mode = "provider_idempotency"\n'
        f'url = "{url}/v1/{{destination}}"\ntimeout_seconds = {timeout}\n'
        f'headers = {{ Authorization = "env:{TOKEN_VARIABLE}" }}\nreceipt = ["/id"]\n'
        + ("draining = true\n" if draining else "")
    )


@pytest.fixture
def wire(
    store: LedgerStore, tmp_path: Path, provider: Provider, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[str, str], Ledger]]:
    monkeypatch.setenv(TOKEN_VARIABLE, f"Bearer {provider.token}")
    clock = FixedClock()
    made: list[Ledger] = []

    def ledger(name: str, text: str) -> Ledger:
        path = tmp_path / name
        path.write_text(text)
        settings = load_settings(store="memory", env="test", executors_file=str(path))
        wired = build_ledger(settings, clock=clock, recorder=store.recorder)
        made.append(wired)
        return wired

    yield ledger
    for wired in made:
        wired.registry.close()  # the store belongs to the fixture


def build_of(ledger: Ledger, state: str = "current") -> str:
    (found,) = [
        e for e in ledger.registry.entries() if e.capability == CAPABILITY and e.state == state
    ]
    return found.build_digest


def test_a_setting_change_by_the_procedure_loses_no_attempt_and_no_presentation(
    wire: Callable[[str, str], Ledger], store: LedgerStore, provider: Provider
) -> None:
    before = wire("executors.toml", entry(provider.url, 10))
    assert isinstance(before.clock, FixedClock)
    world = World(store, clock=before.clock)  # the directory: alice may approve
    old = build_of(before)
    put_record(
        store,
        before.clock,
        kind=DirectoryKind.EXECUTOR_BUILD,
        record_id=executor_build_record_id(CAPABILITY, old),
        values={"delivery_mode": "provider_idempotency", "available": True},
    )
    ctx = before.context

    def proposed(build: str, n: int, on: Ledger) -> str:
        spec = base_spec(capability=CAPABILITY, executor_build=build, content={"n": n})
        return propose(on.context, actor_id="alice", spec_data=spec).proposal_id

    def control(proposal_id: str, on: Ledger) -> str:
        return present(
            on.context,
            proposal_id=proposal_id,
            version=1,
            identity_binding_id="ib1",
            channel_binding_id="cb1",
            conversation_key="conv-1",
        ).token

    # execution is off (no worker runs): 10 approved and queued, 10 controls sent
    queued = [
        approve(ctx, token=control(proposed(old, n, before), before), provenance=world.who)
        for n in range(10)
    ]
    opened = [proposed(old, 100 + n, before) for n in range(10)]
    tokens = [control(p, before) for p in opened]

    # the procedure: keep the old entry, marked draining; the new one beside it
    text = entry(provider.url, 10, draining=True) + "\n" + entry(provider.url, 15)
    after = wire("executors.next.toml", text)
    assert after.views is not None
    after.projector.project_streams([*opened, *(q.attempt_id for q in queued)])
    new = build_of(after)
    assert build_of(after, "draining") == old and new != old
    report = compare(after.registry.entries(), store, after.views, after.clock.now())
    assert report.dropped == []
    assert report.pending[(CAPABILITY, old)] == Bound(queued=10, presentations=10)
    put_record(
        store,
        after.clock,
        kind=DirectoryKind.EXECUTOR_BUILD,
        record_id=executor_build_record_id(CAPABILITY, new),
        values={"delivery_mode": "provider_idempotency", "available": True},
    )

    # after the restart: the open presentations still approve, new proposals use the new build
    later = [approve(after.context, token=t, provenance=world.who) for t in tokens]
    with pytest.raises(ExecutorBuildDraining):
        proposed(old, 999, after)
    fresh = approve(
        after.context, token=control(proposed(new, 1000, after), after), provenance=world.who
    )
    run_recovery(after.make_worker())

    every = [*queued, *later, fresh]
    for answer in every:
        attempt = store.get(ExecutionAttempt, answer.attempt_id)
        assert attempt is not None and attempt.status is AttemptStatus.SUCCEEDED, attempt
        assert provider.effects()[attempt.idempotency_key] == 1
    bound = [store.get(ExecutionAttempt, a.attempt_id) for a in every]
    assert {a.executor_build for a in bound if a is not None} == {old, new}

    # drained: the file without the old entry drops nothing any more
    drained = wire("executors.last.toml", entry(provider.url, 15))
    after.projector.project_streams(opened)
    now = after.clock.now()
    assert compare(drained.registry.entries(), store, after.views, now).dropped == []
