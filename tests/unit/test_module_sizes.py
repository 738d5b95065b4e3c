"""House rule: modules over ~400 lines are split (the CLI by command group, the
worker by step)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 400


def test_no_module_of_api_is_over_the_limit() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for path in sorted(ROOT.joinpath("api").rglob("*.py"))
    }
    assert "api/cli.py" in sizes
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_no_module_of_the_services_is_over_the_limit() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for path in sorted(ROOT.joinpath("domain", "services").rglob("*.py"))
    }
    assert "domain/services/execution.py" in sizes
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_the_worker_is_split_by_step_and_keeps_its_public_names() -> None:
    from domain.services import dispatch, execution, recheck, results, worker_policy

    public = {
        "CrashHook",
        "CrashPoint",
        "Outcome",
        "SimulatedCrash",
        "Worker",
        "WorkerPolicy",
        "settle_seconds",
    }
    assert public <= set(execution.__all__)
    assert all(
        getattr(execution, name) is getattr(worker_policy, name) for name in public - {"Worker"}
    )
    assert hasattr(execution.Worker, "process") and hasattr(execution.Worker, "recover")
    assert hasattr(recheck, "confirmed_recheck") and hasattr(dispatch, "mark_dispatch")
    assert hasattr(results, "record") and hasattr(results, "observe")


def test_each_command_group_has_its_own_module() -> None:
    from api.cli_audit import audit_app
    from api.cli_channels import channels_app
    from api.cli_dynamodb import dynamodb_app
    from api.cli_executors import executors_app
    from api.cli_grants import grants_app
    from api.cli_policies import policies_app
    from api.cli_projections import projections_app
    from api.cli_webhooks import webhooks_app

    groups = {
        "audit": audit_app,
        "channels": channels_app,
        "dynamodb": dynamodb_app,
        "executors": executors_app,
        "grants": grants_app,
        "policies": policies_app,
        "projections": projections_app,
        "webhooks": webhooks_app,
    }
    from api.cli import app

    assert {info.name: info.typer_instance for info in app.registered_groups} == groups
