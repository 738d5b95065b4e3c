"""Every entry point goes through the service layer (``api.service``): no router
imports another router, the console imports none, the service layer imports no
web framework, and routers reach the ledger only through a service function."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "api"
ROUTERS = API / "http" / "routers"
PROBES = {"health.py"}  # liveness, readiness and the metrics page: no resource behind them


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def modules_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if p.name != "__init__.py")


def test_no_router_is_imported_by_another_router_or_by_the_console() -> None:
    importers = [*modules_under(ROUTERS), *modules_under(API / "console")]
    assert len(importers) >= 10
    offending = {
        str(path.relative_to(ROOT)): sorted(
            m for m in imported_modules(path) if m.startswith("api.http.routers")
        )
        for path in importers
    }
    assert {k: v for k, v in offending.items() if v} == {}


def test_the_service_layer_imports_no_web_framework_and_no_entry_point() -> None:
    forbidden = ("fastapi", "starlette", "api.http.routers", "api.http.deps", "api.console")
    found = {
        str(path.relative_to(ROOT)): sorted(
            m for m in imported_modules(path) if m.startswith(forbidden)
        )
        for path in modules_under(API / "service")
    }
    assert "api/service/decisions.py" in found
    assert {k: v for k, v in found.items() if v} == {}


def test_routers_reach_the_ledger_only_through_service_functions() -> None:
    # ``ledger.context``, ``ledger.projector``, ``ledger.views``... in a route are
    # orchestration that another entry point would not repeat
    reaching = re.compile(r"\bledger\.[a-z_]+")
    found = {
        path.name: sorted(set(reaching.findall(path.read_text())))
        for path in modules_under(ROUTERS)
        if path.name not in PROBES
    }
    assert "approvals.py" in found
    assert {k: v for k, v in found.items() if v} == {}
