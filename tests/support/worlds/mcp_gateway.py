"""The execution world with the gateway's ``mcp`` executor against the downstream
tasks service (``tests.support.mcp_downstream``), which counts calls per key."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapters.executors.loader import LoadedExecutors, load_executors
from adapters.executors.mcp import McpExecutor
from adapters.settings import load_settings
from adapters.store import LedgerStore
from domain.directory import DirectoryKind, executor_build_record_id
from domain.services.approval import approve
from tests.support.clocks import FixedClock
from tests.support.mcp_downstream import State
from tests.support.worlds.execution import ExecutionWorld

# the gated tool per delivery mode (the mcp executor offers no correlation lookup)
GATED = {
    "provider_idempotency": ("create_task", "tasks.create", {"title": "Buy milk"}),
    "operator_reconciliation_only": (
        "send_message",
        "messages.send",
        {"to": "bob", "text": "Dinner at 8"},
    ),
}


def gateway_toml(url: str, *, timeout: float = 5) -> str:
    """One downstream server over streamable HTTP, one gated tool per delivery mode."""
    blocks = [f'[[mcp]]\nserver = "tasks"\nurl = "{url}"\ntimeout_seconds = {timeout}\n']
    for mode, (tool, capability, _) in GATED.items():
        blocks.append(
            f'[[mcp.tool]]\nname = "{tool}"\ncapability = "{capability}"\n'
            f'delivery_mode = "{mode}"\npermission = "tasks.write"\neffect = "create"\n'
            'destination = "tasks"\nreceipt = ["/id", "/status"]\n'
        )
    return "\n".join(blocks)


@dataclass
class GatewayWorld(ExecutionWorld):
    """Approvals of the two gated tools; effects are counted by the downstream itself."""

    downstream: State | None = None
    loaded: LoadedExecutors | None = None
    builds: dict[str, McpExecutor] = field(default_factory=dict)
    schema_digests: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        assert self.loaded is not None
        for entry in self.loaded.registry.entries():
            executor = self.loaded.registry.get(entry.capability, entry.build_digest)
            assert isinstance(executor, McpExecutor)
            self.builds[entry.delivery_mode.value] = executor
            self.schema_digests[entry.delivery_mode.value] = entry.schema_digest
            self.put(
                DirectoryKind.EXECUTOR_BUILD,
                executor_build_record_id(entry.capability, entry.build_digest),
                delivery_mode=entry.delivery_mode.value,
                available=True,
            )

    def approved(self, mode: str, simulate: str = "success") -> str:
        executor = self.builds[mode]
        proposal_id = self.propose(
            capability=executor.capability,
            executor_build=executor.build_digest,
            schema_digest=self.schema_digests[mode],
            content=dict(GATED[mode][2]),
        )
        token = self.present(proposal_id).token
        return approve(self.ctx, token=token, provenance=self.who).attempt_id

    def swap(self, mode: str, wrapper: Any) -> Any:
        assert self.registry is not None
        wrapped = wrapper(self.builds[mode])
        self.registry.replace(wrapped)
        return wrapped

    def effects_of(self, attempt_id: str) -> int:
        assert self.downstream is not None
        return self.downstream.effects().get(self.attempt(attempt_id).idempotency_key, 0)

    def requests_of(self, attempt_id: str) -> int:
        assert self.downstream is not None
        return self.downstream.requests().get(self.attempt(attempt_id).idempotency_key, 0)


def gateway_world(store: LedgerStore, url: str, state: Path, tmp_path: Path) -> GatewayWorld:
    clock = FixedClock()
    path = tmp_path / "executors.toml"
    path.write_text(gateway_toml(url))
    settings = load_settings(executors_file=str(path), fake_executors=False, store="memory")
    loaded = load_executors(settings, clock=clock, environ={}, plugins=[])
    assert {e.capability for e in loaded.registry.entries()} == {c for _, c, _ in GATED.values()}
    return GatewayWorld(
        store, clock=clock, registry=loaded.registry, downstream=State(state), loaded=loaded
    )
