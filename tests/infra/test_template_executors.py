"""The template gives every function the same executors file and resolves the secrets it
names from Secrets Manager dynamic references; no parameter ever holds a secret value."""

from __future__ import annotations

import re
from typing import Any

import pytest

SLOTS = ["LEDGER_EXECUTOR_SECRET_1", "LEDGER_EXECUTOR_SECRET_2", "LEDGER_EXECUTOR_SECRET_3"]


def test_the_executors_file_reaches_every_function_when_given(template: dict[str, Any]) -> None:
    variables = template["Globals"]["Function"]["Environment"]["Variables"]
    assert variables["LEDGER_EXECUTORS_FILE"] == {
        "Fn::If": ["HasExecutorsFile", {"Ref": "ExecutorsFile"}, {"Ref": "AWS::NoValue"}]
    }
    declared = template["Parameters"]["ExecutorsFile"]
    assert declared["Default"] == ""
    pattern = re.compile(declared["AllowedPattern"])
    assert pattern.fullmatch("executors.toml") and pattern.fullmatch("conf/tasks.toml")
    assert not pattern.fullmatch("/etc/passwd") and not pattern.fullmatch("x.toml; rm -rf")
    for function in ("WorkerFunction", "ProjectorFunction", "ApiFunction", "WebhookFunction"):
        own = template["Resources"][function]["Properties"]["Environment"]["Variables"]
        assert not set(own) & {"LEDGER_EXECUTORS_FILE", *SLOTS}  # nobody overrides it


@pytest.mark.parametrize("slot", [1, 2, 3])
def test_secret_values_come_only_from_secrets_manager_dynamic_references(
    template: dict[str, Any], slot: int
) -> None:
    variables = template["Globals"]["Function"]["Environment"]["Variables"]
    condition, reference, absent = variables[f"LEDGER_EXECUTOR_SECRET_{slot}"]["Fn::If"]
    assert condition == f"HasExecutorSecret{slot}"
    assert absent == {"Ref": "AWS::NoValue"}
    assert reference == {
        "Fn::Sub": "{{resolve:secretsmanager:${ExecutorSecretsId}:"
        f"SecretString:${{ExecutorSecret{slot}Key}}}}}}"
    }
    key = template["Parameters"][f"ExecutorSecret{slot}Key"]
    assert key["Default"] == "" and not re.fullmatch(key["AllowedPattern"], "Bearer abc")


def test_no_parameter_can_carry_a_secret_value(template: dict[str, Any]) -> None:
    for name, parameter in template["Parameters"].items():
        if "Secret" in name:
            assert "AllowedPattern" in parameter, name
            assert not re.fullmatch(parameter["AllowedPattern"], "sk_live abc def"), name
    secrets_id = re.compile(template["Parameters"]["ExecutorSecretsId"]["AllowedPattern"])
    assert secrets_id.fullmatch(
        "arn:aws:secretsmanager:eu-west-1:123456789012:secret:ledger/executors-AbCdEf"
    )


def test_the_lambda_settings_read_the_packaged_file_from_the_code_root(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from adapters.aws_lambda.common import load_lambda_settings

    monkeypatch.setenv("LAMBDA_TASK_ROOT", str(tmp_path))
    monkeypatch.setenv("LEDGER_STORE", "dynamodb")
    monkeypatch.setenv("LEDGER_EXECUTORS_FILE", "executors.toml")
    assert load_lambda_settings().executors_file == str(tmp_path / "executors.toml")
