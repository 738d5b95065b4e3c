"""The execution world with the http executor against the reference provider."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapters.executors.http import HttpExecutor
from adapters.executors.loader import LoadedExecutors
from adapters.store import LedgerStore
from domain.directory import DirectoryKind, executor_build_record_id
from domain.services.approval import approve
from tests.support.clocks import FixedClock
from tests.support.http_executors import HTTP_MODES, executors_toml, load_http
from tests.support.provider_fixtures import Provider
from tests.support.worlds.execution import ExecutionWorld


@dataclass
class HttpWorld(ExecutionWorld):
    """Approvals for the three http builds; effects are counted by the provider itself."""

    provider: Provider | None = None
    loaded: LoadedExecutors | None = None
    builds: dict[str, HttpExecutor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        assert self.loaded is not None
        for entry in self.loaded.registry.entries():
            executor = self.loaded.registry.get(entry.capability, entry.build_digest)
            assert isinstance(executor, HttpExecutor)
            self.builds[entry.delivery_mode.value] = executor
            self.put(
                DirectoryKind.EXECUTOR_BUILD,
                executor_build_record_id(entry.capability, entry.build_digest),
                delivery_mode=entry.delivery_mode.value,
                available=True,
            )

    def approved(self, mode: str, simulate: str = "success", **content: Any) -> str:
        executor = self.builds[mode]
        proposal_id = self.propose(
            capability=executor.capability,
            executor_build=executor.build_digest,
            content={"title": "Buy milk", **content},
        )
        token = self.present(proposal_id).token
        return approve(self.ctx, token=token, provenance=self.who).attempt_id

    def swap(self, mode: str, wrapper: Any) -> Any:
        assert self.registry is not None
        wrapped = wrapper(self.builds[mode])
        self.registry.replace(wrapped)
        return wrapped

    def effects_of(self, attempt_id: str) -> int:
        assert self.provider is not None
        return self.provider.effects().get(self.attempt(attempt_id).idempotency_key, 0)

    def requests_of(self, attempt_id: str) -> int:
        assert self.provider is not None
        return self.provider.requests().get(self.attempt(attempt_id).idempotency_key, 0)


def http_world(
    store: LedgerStore, provider: Provider, tmp_path: Path, *, clock: Any = None, timeout: float = 5
) -> HttpWorld:
    clock = clock or FixedClock()
    loaded = load_http(
        tmp_path, executors_toml(provider.url, timeout=timeout), provider.token, clock=clock
    )
    assert {e.capability for e in loaded.registry.entries()} == set(HTTP_MODES.values())
    return HttpWorld(store, clock=clock, registry=loaded.registry, provider=provider, loaded=loaded)
