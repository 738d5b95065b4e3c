"""The template passes cfn-lint and the SAM translator, offline."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.support.sam_template import FUNCTIONS, INFRA, TEMPLATE, resources_of


def test_cfn_lint_reports_nothing_with_informational_checks() -> None:
    from cfnlint.api import ManualArgs, lint_file

    matches = lint_file(Path(TEMPLATE), ManualArgs(include_checks=["I"]))
    assert [f"{m.rule.id} {m.message} (line {m.linenumber})" for m in matches] == []


def test_sam_translator_makes_the_functions_sources_and_schedule(
    transformed: dict[str, Any],
) -> None:
    assert "Transform" not in transformed
    assert set(resources_of(transformed, "AWS::Lambda::Function")) == set(FUNCTIONS)
    mappings = resources_of(transformed, "AWS::Lambda::EventSourceMapping")
    assert {m["Properties"]["FunctionName"]["Ref"] for m in mappings.values()} == {
        "WorkerFunction",
        "ProjectorFunction",
        "WebhookFunction",
    }
    rules = resources_of(transformed, "AWS::Events::Rule")
    assert set(rules) == {
        "WorkerFunctionRecovery",
        "CheckpointFunctionCheckpoint",
        "WebhookFunctionRetries",
    }
    assert set(resources_of(transformed, "AWS::ApiGatewayV2::Api")) == {"LedgerHttpApi"}
    # Every role is ours: SAM generated none (and so attached no managed policy).
    roles = resources_of(transformed, "AWS::IAM::Role")
    assert set(roles) == {"WorkerRole", "ProjectorRole", "ApiRole", "CheckpointRole", "WebhookRole"}
    assert all("ManagedPolicyArns" not in r["Properties"] for r in roles.values())


def test_handlers_name_importable_modules(template: dict[str, Any]) -> None:
    import importlib

    for name in FUNCTIONS:
        module, _, attribute = template["Resources"][name]["Properties"]["Handler"].rpartition(".")
        assert callable(getattr(importlib.import_module(module), attribute)), name


def test_the_build_makefile_has_a_target_for_every_function(template: dict[str, Any]) -> None:
    code_dir = INFRA / template["Globals"]["Function"]["CodeUri"]
    makefile = (code_dir / "Makefile").read_text()
    for name in FUNCTIONS:
        assert template["Resources"][name]["Metadata"] == {"BuildMethod": "makefile"}
        assert re.search(rf"^[^\t#]*\bbuild-{name}\b[^=]*:", makefile, re.MULTILINE), name
