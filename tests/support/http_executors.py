"""Executors files and http executors pointed at the reference provider."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from adapters.executors.http import HttpExecutor
from adapters.executors.loader import LoadedExecutors, load_executors
from adapters.settings import load_settings
from domain.ports import Clock, ExecutionRequest
from domain.spec import parse_spec
from tests.support.worlds.approval import base_spec

TOKEN_VARIABLE = "TASKS_TOKEN"
Build = Callable[..., HttpExecutor]
# capability per delivery mode, as the crash matrix uses them
HTTP_MODES = {
    "provider_idempotency": "tasks.create",
    "correlation_lookup": "tasks.lookup",
    "operator_reconciliation_only": "tasks.operator",
}


def executors_toml(
    base_url: str, *, timeout: float = 5, receipt: str = '["/id", "/status"]', extra: str = ""
) -> str:
    """One [[http]] entry per delivery mode against ``base_url``."""
    blocks = []
    for mode, capability in HTTP_MODES.items():
        lookup = (
            f'lookup_url = "{base_url}/v1/by-key/{{idempotency_key}}"\n'
            if mode == "correlation_lookup"
            else ""
        )
        blocks.append(
            f'[[http]]\ncapability = "{capability}"\ndelivery_mode = "{mode}"\n'
            f'url = "{base_url}/v1/{{destination}}"\ntimeout_seconds = {timeout}\n'
            f'headers = {{ Authorization = "env:{TOKEN_VARIABLE}" }}\n'
            f"receipt = {receipt}\n{lookup}{extra}\n"
        )
    return "\n".join(blocks)


def load_http(
    tmp_path: Path,
    text: str,
    token: str,
    clock: Clock | None = None,
    environ: Mapping[str, str] | None = None,
    **settings: Any,
) -> LoadedExecutors:
    """Write ``text`` as the executors file and build the registry from it (no plugins)."""
    path = tmp_path / "executors.toml"
    path.write_text(text)
    env = {TOKEN_VARIABLE: f"Bearer {token}"} if environ is None else environ
    loaded_settings = load_settings(
        executors_file=str(path), fake_executors=False, store="memory", **settings
    )
    return load_executors(loaded_settings, clock=clock, environ=env, plugins=[])


def request_for(
    executor: HttpExecutor,
    key: str,
    *,
    seconds: float = 20,
    content: dict[str, Any] | None = None,
    **spec: Any,
) -> ExecutionRequest:
    data = base_spec(
        capability=executor.capability,
        executor_build=executor.build_digest,
        content=content or {"title": "Buy milk"},
        **spec,
    )
    return ExecutionRequest(
        parse_spec(data), "att_test", key, datetime.now(UTC) + timedelta(seconds=seconds)
    )
