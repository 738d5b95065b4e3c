"""Static assertions on the functions, their triggers, failure queues and alarms."""

from __future__ import annotations

import json
from typing import Any

import pytest

from adapters.aws_lambda import projector as projector_module
from adapters.aws_lambda import webhooks as webhooks_module
from adapters.aws_lambda import worker as worker_module
from adapters.aws_lambda.common import NAMESPACE
from adapters.settings import Settings
from adapters.streams import WORK_TOPICS
from domain.spec import ATTEMPT_ID_PREFIX
from tests.support.sam_template import filter_patterns, passes, resources_of

FOURTEEN_DAYS = 14 * 24 * 3600


def _function(template: dict[str, Any], name: str) -> dict[str, Any]:
    resource: dict[str, Any] = template["Resources"][name]
    return resource


def _source(template: dict[str, Any], function: str, event: str) -> dict[str, Any]:
    properties: dict[str, Any] = _function(template, function)["Properties"]["Events"][event][
        "Properties"
    ]
    return properties


def _record(event_name: str, pk: str, topic: str | None = None) -> dict[str, Any]:
    image: dict[str, Any] = {"pk": {"S": pk}, "sk": {"N": "1"}}
    if topic is not None:
        image["topic"] = {"S": topic}
    return {
        "eventName": event_name,
        "dynamodb": {"Keys": {"pk": {"S": pk}, "sk": {"N": "1"}}, "NewImage": image},
    }


QUEUED, REQUEUED = sorted(WORK_TOPICS)
OTHER_ATTEMPT_TOPIC = "domain.attempt:ExecutionAttempt.ResultRecorded"


@pytest.mark.parametrize(
    ("function", "event"),
    [
        ("WorkerFunction", "QueuedAttempts"),
        ("ProjectorFunction", "AttemptEvents"),
        ("WebhookFunction", "LedgerEvents"),
    ],
)
def test_filter_patterns_are_one_line_of_json(
    template: dict[str, Any], function: str, event: str
) -> None:
    for entry in _source(template, function, event)["FilterCriteria"]["Filters"]:
        assert "\n" not in entry["Pattern"]
        assert isinstance(json.loads(entry["Pattern"]), dict)


def test_worker_filter_is_exactly_inserts_of_the_work_topics(template: dict[str, Any]) -> None:
    (pattern,) = filter_patterns(_function(template, "WorkerFunction"), "QueuedAttempts")
    assert pattern["eventName"] == ["INSERT"]
    assert set(pattern["dynamodb"]["NewImage"]["topic"]["S"]) == WORK_TOPICS
    assert pattern["dynamodb"]["NewImage"]["pk"]["S"] == [{"prefix": ATTEMPT_ID_PREFIX}]


@pytest.mark.parametrize(
    ("record", "delivered"),
    [
        (_record("INSERT", "att_1", QUEUED), True),
        (_record("INSERT", "att_1", REQUEUED), True),
        (_record("INSERT", "att_1", OTHER_ATTEMPT_TOPIC), False),
        (_record("MODIFY", "att_1", QUEUED), False),
        (_record("REMOVE", "att_1", QUEUED), False),
        (_record("INSERT", "prop_1", "domain.proposal:Proposal.Claimed"), False),
        (_record("INSERT", "due#att_1"), False),
        (_record("INSERT", "lookup#token:x"), False),
    ],
)
def test_worker_filter_delivers_only_queued_and_requeued_attempt_inserts(
    template: dict[str, Any], record: dict[str, Any], delivered: bool
) -> None:
    patterns = filter_patterns(_function(template, "WorkerFunction"), "QueuedAttempts")
    assert passes(patterns, record) is delivered


@pytest.mark.parametrize(
    ("record", "delivered"),
    [
        (_record("INSERT", "att_1", QUEUED), True),
        (_record("INSERT", "att_1", OTHER_ATTEMPT_TOPIC), True),
        (_record("MODIFY", "att_1", OTHER_ATTEMPT_TOPIC), False),
        (_record("INSERT", "prop_1", "domain.proposal:Proposal.Claimed"), True),
        (_record("INSERT", "prop_1", "domain.proposal:Proposal.Declined"), True),
        (_record("MODIFY", "prop_1", "domain.proposal:Proposal.Claimed"), False),
        (_record("INSERT", "due#att_1"), False),
        (_record("INSERT", "head#prop_1"), False),
        (_record("INSERT", "lookup#token:x"), False),
        (_record("INSERT", "view#attempt_status#att_1"), False),
        (_record("INSERT", "view#proposal_inbox#prop_1"), False),
    ],
)
def test_projector_filter_delivers_attempt_and_proposal_event_inserts(
    template: dict[str, Any], record: dict[str, Any], delivered: bool
) -> None:
    patterns = filter_patterns(_function(template, "ProjectorFunction"), "AttemptEvents")
    assert passes(patterns, record) is delivered


def test_the_webhook_function_reads_what_the_projector_reads(template: dict[str, Any]) -> None:
    assert filter_patterns(_function(template, "WebhookFunction"), "LedgerEvents") == (
        filter_patterns(_function(template, "ProjectorFunction"), "AttemptEvents")
    )
    assert _function(template, "WebhookFunction")["Properties"]["Handler"] == (
        "adapters.aws_lambda.webhooks.handler"
    )
    env = _function(template, "WebhookFunction")["Properties"]["Environment"]["Variables"]
    assert env["POWERTOOLS_SERVICE_NAME"] == webhooks_module.SERVICE


def test_a_schedule_sends_the_due_webhook_deliveries_again(
    template: dict[str, Any], transformed: dict[str, Any]
) -> None:
    schedule = _function(template, "WebhookFunction")["Properties"]["Events"]["Retries"]
    assert schedule["Type"] == "Schedule"
    assert json.loads(schedule["Properties"]["Input"]) == {"mode": webhooks_module.DELIVER_MODE}
    assert schedule["Properties"]["Schedule"] == {"Ref": "WebhookRetrySchedule"}
    rule = resources_of(transformed, "AWS::Events::Rule")["WebhookFunctionRetries"]
    (target,) = rule["Properties"]["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": ["WebhookFunction", "Arn"]}


@pytest.mark.parametrize(
    ("function", "event", "queue"),
    [
        ("WorkerFunction", "QueuedAttempts", "WorkerFailureQueue"),
        ("ProjectorFunction", "AttemptEvents", "ProjectorFailureQueue"),
        ("WebhookFunction", "LedgerEvents", "WebhookFailureQueue"),
    ],
)
def test_stream_sources_report_partial_failures_bisect_bound_retries_and_keep_metadata(
    template: dict[str, Any], function: str, event: str, queue: str
) -> None:
    assert _function(template, function)["Properties"]["Events"][event]["Type"] == "DynamoDB"
    source = _source(template, function, event)
    assert source["Stream"] == {"Fn::GetAtt": ["LedgerTable", "StreamArn"]}
    assert source["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert source["BisectBatchOnFunctionError"] is True
    assert 0 <= source["MaximumRetryAttempts"] <= 10
    assert 60 <= source["MaximumRecordAgeInSeconds"] <= 24 * 3600
    assert source["StartingPosition"] == "TRIM_HORIZON"
    # SQS, never S3: an S3 destination would also receive the records themselves.
    assert source["DestinationConfig"]["OnFailure"] == {
        "Type": "SQS",
        "Destination": {"Fn::GetAtt": [queue, "Arn"]},
    }


@pytest.mark.parametrize(
    "queue", ["WorkerFailureQueue", "ProjectorFailureQueue", "WebhookFailureQueue"]
)
def test_failure_queues_are_encrypted_and_keep_messages_fourteen_days(
    template: dict[str, Any], queue: str
) -> None:
    properties = template["Resources"][queue]["Properties"]
    assert properties["SqsManagedSseEnabled"] is True
    assert properties["MessageRetentionPeriod"] == FOURTEEN_DAYS


def test_schedule_invokes_the_same_worker_in_recovery_mode(
    template: dict[str, Any], transformed: dict[str, Any]
) -> None:
    schedule = _function(template, "WorkerFunction")["Properties"]["Events"]["Recovery"]
    assert schedule["Type"] == "Schedule"
    assert json.loads(schedule["Properties"]["Input"]) == {"mode": worker_module.RECOVERY_MODE}
    assert schedule["Properties"]["Schedule"] == {"Ref": "RecoverySchedule"}
    rule = resources_of(transformed, "AWS::Events::Rule")["WorkerFunctionRecovery"]
    (target,) = rule["Properties"]["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": ["WorkerFunction", "Arn"]}
    assert json.loads(target["Input"]) == {"mode": "recovery"}


def test_api_function_serves_the_http_api_and_has_no_stream_source(
    template: dict[str, Any],
) -> None:
    events = _function(template, "ApiFunction")["Properties"]["Events"]
    assert [e["Type"] for e in events.values()] == ["HttpApi"]
    assert _function(template, "ApiFunction")["Properties"]["Handler"] == "api.aws_lambda.handler"


def test_worker_outlives_its_lease(template: dict[str, Any]) -> None:
    timeout = _function(template, "WorkerFunction")["Properties"]["Timeout"]
    assert template["Parameters"]["LeaseSeconds"]["MaxValue"] < timeout


@pytest.mark.parametrize(
    ("parameter", "variable", "field"),
    [
        ("LeaseSeconds", "LEDGER_LEASE_SECONDS", "lease_seconds"),
        ("PresentationTtlSeconds", "LEDGER_PRESENTATION_TTL_SECONDS", "presentation_ttl_seconds"),
        ("BackoffBaseSeconds", "LEDGER_BACKOFF_BASE_SECONDS", "backoff_base_seconds"),
        ("BackoffMaxSeconds", "LEDGER_BACKOFF_MAX_SECONDS", "backoff_max_seconds"),
        ("ExecutionEnabled", "LEDGER_EXECUTION_ENABLED", "execution_enabled"),
        ("WaitingForBuildSeconds", "LEDGER_WAITING_FOR_BUILD_SECONDS", "waiting_for_build_seconds"),
    ],
)
def test_parameters_reach_every_function_as_settings(
    template: dict[str, Any], parameter: str, variable: str, field: str
) -> None:
    variables = template["Globals"]["Function"]["Environment"]["Variables"]
    assert variables[variable] == {"Ref": parameter}
    assert field in Settings.model_fields
    declared = template["Parameters"][parameter]
    default = Settings.model_fields[field].default
    assert str(declared["Default"]).lower() == str(default).lower()
    for bound in Settings.model_fields[field].metadata:  # the template never allows more
        if hasattr(bound, "ge"):
            assert declared["MinValue"] >= bound.ge
        if hasattr(bound, "le"):
            assert declared["MaxValue"] <= bound.le


def test_execution_switch_defaults_on_and_only_takes_true_or_false(
    template: dict[str, Any],
) -> None:
    assert template["Parameters"]["ExecutionEnabled"]["AllowedValues"] == ["true", "false"]
    assert template["Parameters"]["ExecutionEnabled"]["Default"] == "true"


def test_deployed_functions_run_as_production_on_dynamodb(template: dict[str, Any]) -> None:
    variables = template["Globals"]["Function"]["Environment"]["Variables"]
    assert variables["LEDGER_ENV"] == "production"
    assert "LEDGER_FAKE_EXECUTORS" not in variables
    assert "LEDGER_AUTH_HS256_SECRET" not in variables
    assert variables["LEDGER_AUTH_RS256_PUBLIC_KEY"] == {"Ref": "AuthRs256PublicKey"}
    assert variables["POWERTOOLS_LOGGER_LOG_EVENT"] == "false"


def _alarm(template: dict[str, Any], name: str) -> dict[str, Any]:
    properties: dict[str, Any] = template["Resources"][name]["Properties"]
    return properties


@pytest.mark.parametrize(
    "queue", ["WorkerFailureQueue", "ProjectorFailureQueue", "WebhookFailureQueue"]
)
def test_alarm_on_failure_queue_depth(template: dict[str, Any], queue: str) -> None:
    alarm = _alarm(template, f"{queue}Alarm")
    assert (alarm["Namespace"], alarm["MetricName"]) == (
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
    )
    assert alarm["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": [queue, "QueueName"]}}
    ]
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)


@pytest.mark.parametrize("function", ["WorkerFunction", "ProjectorFunction", "WebhookFunction"])
def test_alarm_on_function_errors(template: dict[str, Any], function: str) -> None:
    alarm = _alarm(template, function.replace("Function", "ErrorsAlarm"))
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/Lambda", "Errors")
    assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": function}}]
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)


@pytest.mark.parametrize(
    ("alarm_name", "metric"),
    [("OutcomeUnknownAlarm", "OutcomeUnknown"), ("RecoveryLagAlarm", "RecoveryLagSeconds")],
)
def test_alarms_on_handler_metrics_use_the_names_the_handler_emits(
    template: dict[str, Any], alarm_name: str, metric: str
) -> None:
    alarm = _alarm(template, alarm_name)
    assert alarm["Namespace"] == NAMESPACE
    assert alarm["MetricName"] == metric
    assert alarm["Dimensions"] == [{"Name": "service", "Value": worker_module.SERVICE}]
    env = _function(template, "WorkerFunction")["Properties"]["Environment"]["Variables"]
    assert env["POWERTOOLS_SERVICE_NAME"] == worker_module.SERVICE
    projector_env = _function(template, "ProjectorFunction")["Properties"]["Environment"]
    assert projector_env["Variables"]["POWERTOOLS_SERVICE_NAME"] == projector_module.SERVICE


def test_every_alarm_notifies_the_optional_topic(template: dict[str, Any]) -> None:
    alarms = resources_of(template, "AWS::CloudWatch::Alarm")
    assert len(alarms) == 8
    for name, alarm in alarms.items():
        assert alarm["Properties"]["AlarmActions"] == {
            "Fn::If": ["HasAlarmTopic", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]
        }, name
