"""Least privilege: each function's role, action by action, resource by resource.

The expected grants are written out in full, so adding or widening any
permission fails here first. Key prefixes come from the code that makes keys.
"""

from __future__ import annotations

from typing import Any

import pytest

from adapters.dynamodb import items as it
from adapters.dynamodb.views import VIEW_PREFIX
from domain.directory import DirectoryKind
from domain.restore import RESTORE_LOG_ID
from domain.spec import ATTEMPT_ID_PREFIX
from projections.webhooks import DELIVERY_VIEW, EXPIRY_WATCH_VIEW, START_VIEW
from tests.support.sam_template import (
    CHECKPOINT_OBJECTS_ARN,
    DUE_INDEX_ARN,
    LIST_INDEX_ARN,
    STREAM_ARN,
    TABLE_ARN,
    TABLE_STREAMS_ARN,
    as_list,
    get_att,
    grants,
    resources_of,
    statements,
)

ATTEMPTS = f"{ATTEMPT_ID_PREFIX}*"
DUE = f"{it.DUE_PREFIX}{ATTEMPT_ID_PREFIX}*"
VIEWS = f"{VIEW_PREFIX}*"
LOOKUPS = f"{it.LOOKUP_PREFIX}*"
PROPOSALS = "prop_*"
DELIVERIES = f"{VIEW_PREFIX}{DELIVERY_VIEW}#*"
WATCHES = f"{VIEW_PREFIX}{EXPIRY_WATCH_VIEW}#*"
STARTS = f"{VIEW_PREFIX}{START_VIEW}#*"  # when a start = "now" subscription first ran
DIRECTORY = frozenset(f"{kind.value}:*" for kind in DirectoryKind)
RESTORES = f"{RESTORE_LOG_ID}*"  # recovery settles a recorded restore (I17)
LAYOUT = f"{it.LAYOUT_PREFIX}*"  # the table's layout record (adapters/dynamodb/layout.py)


def heads(*prefixes: str) -> frozenset[str]:
    """The head-index items of streams with these key prefixes (moved by the same commit)."""
    return frozenset(it.HEAD_PREFIX + p for p in prefixes)


ALL_STREAMS = frozenset({PROPOSALS, ATTEMPTS}) | DIRECTORY

Grant = tuple[str, str, frozenset[str] | None]


def _stream_consumer(log_group: str, queue: str) -> set[Grant]:
    return {
        ("logs:CreateLogStream", get_att(log_group, "Arn"), None),
        ("logs:PutLogEvents", get_att(log_group, "Arn"), None),
        ("dynamodb:DescribeStream", STREAM_ARN, None),
        ("dynamodb:GetRecords", STREAM_ARN, None),
        ("dynamodb:GetShardIterator", STREAM_ARN, None),
        ("dynamodb:ListStreams", TABLE_STREAMS_ARN, None),
        ("sqs:SendMessage", get_att(queue, "Arn"), None),
    }


EXPECTED: dict[str, set[Grant]] = {
    "WorkerRole": _stream_consumer("WorkerLogGroup", "WorkerFailureQueue")
    | {
        ("dynamodb:GetItem", TABLE_ARN, None),
        ("dynamodb:Query", TABLE_ARN, None),
        ("dynamodb:Query", DUE_INDEX_ARN, None),
        ("dynamodb:Query", LIST_INDEX_ARN, None),
        (
            "dynamodb:PutItem",
            TABLE_ARN,
            frozenset({ATTEMPTS, DUE, RESTORES}) | heads(ATTEMPTS, RESTORES),
        ),
        ("dynamodb:UpdateItem", TABLE_ARN, heads(ATTEMPTS, RESTORES, PROPOSALS)),
        # recovery's escalation pass: the Escalated event and the proposal's head
        ("dynamodb:PutItem", TABLE_ARN, frozenset({PROPOSALS}) | heads(PROPOSALS)),
        ("dynamodb:DeleteItem", TABLE_ARN, frozenset({DUE})),
        ("dynamodb:ConditionCheckItem", TABLE_ARN, DIRECTORY),
        ("dynamodb:BatchGetItem", TABLE_ARN, DIRECTORY | heads(*DIRECTORY)),
    },
    "ProjectorRole": _stream_consumer("ProjectorLogGroup", "ProjectorFailureQueue")
    | {
        ("dynamodb:Query", TABLE_ARN, frozenset({ATTEMPTS, PROPOSALS})),
        ("dynamodb:PutItem", TABLE_ARN, frozenset({VIEWS})),
    },
    "ApiRole": {
        ("logs:CreateLogStream", get_att("ApiLogGroup", "Arn"), None),
        ("logs:PutLogEvents", get_att("ApiLogGroup", "Arn"), None),
        ("dynamodb:GetItem", TABLE_ARN, None),
        ("dynamodb:Query", TABLE_ARN, None),
        ("dynamodb:Query", LIST_INDEX_ARN, None),
        (
            "dynamodb:PutItem",
            TABLE_ARN,
            frozenset({PROPOSALS, ATTEMPTS, DUE, LOOKUPS, VIEWS}) | DIRECTORY | heads(*ALL_STREAMS),
        ),
        ("dynamodb:UpdateItem", TABLE_ARN, heads(*ALL_STREAMS)),
        ("dynamodb:DeleteItem", TABLE_ARN, frozenset({DUE})),
        ("dynamodb:ConditionCheckItem", TABLE_ARN, DIRECTORY),
        ("dynamodb:ConditionCheckItem", TABLE_ARN, frozenset({LAYOUT})),
        ("dynamodb:BatchGetItem", TABLE_ARN, DIRECTORY | heads(*DIRECTORY)),
    },
    # reads attempt and proposal streams; reads and writes delivery records only
    "WebhookRole": _stream_consumer("WebhookLogGroup", "WebhookFailureQueue")
    | {
        ("dynamodb:Query", TABLE_ARN, frozenset({ATTEMPTS, PROPOSALS})),
        ("dynamodb:Query", LIST_INDEX_ARN, None),
        ("dynamodb:GetItem", TABLE_ARN, frozenset({DELIVERIES, WATCHES, STARTS})),
        ("dynamodb:PutItem", TABLE_ARN, frozenset({DELIVERIES, WATCHES, STARTS})),
    },
    "CheckpointRole": {
        ("logs:CreateLogStream", get_att("CheckpointLogGroup", "Arn"), None),
        ("logs:PutLogEvents", get_att("CheckpointLogGroup", "Arn"), None),
        ("dynamodb:Query", LIST_INDEX_ARN, None),
        ("dynamodb:GetItem", TABLE_ARN, frozenset({LAYOUT})),
        ("s3:PutObject", CHECKPOINT_OBJECTS_ARN, None),
    },
}
ROLE_OF = {
    "WorkerFunction": "WorkerRole",
    "ProjectorFunction": "ProjectorRole",
    "ApiFunction": "ApiRole",
    "CheckpointFunction": "CheckpointRole",
    "WebhookFunction": "WebhookRole",
}


@pytest.mark.parametrize("role", sorted(EXPECTED))
def test_role_grants_exactly_the_expected_actions_on_the_expected_resources(
    template: dict[str, Any], role: str
) -> None:
    found = list(grants(template["Resources"][role]))
    assert len(found) == len(set(found)), "a grant is repeated"
    assert set(found) == EXPECTED[role]


@pytest.mark.parametrize("function", sorted(ROLE_OF))
def test_each_function_runs_with_its_own_role(transformed: dict[str, Any], function: str) -> None:
    role = transformed["Resources"][function]["Properties"]["Role"]
    assert role == {"Fn::GetAtt": [ROLE_OF[function], "Arn"]}


# (role, Sid) of statements AWS forces to a "*" resource. None: every action
# used here supports resource-level permissions (ListStreams included, scoped
# to this table's streams as AWS documents).
WILDCARD_EXEMPT: frozenset[tuple[str, str]] = frozenset()


def test_no_statement_has_a_wildcard_resource_or_action(transformed: dict[str, Any]) -> None:
    for name, role in resources_of(transformed, "AWS::IAM::Role").items():
        for statement in statements(role):
            for action in as_list(statement["Action"]):
                assert "*" not in action, (name, action)
            if (name, statement.get("Sid", "")) in WILDCARD_EXEMPT:
                continue
            for resource in as_list(statement["Resource"]):
                # Always an intrinsic naming a template resource: never "*", never a literal ARN.
                assert isinstance(resource, dict), (name, statement.get("Sid"), resource)


def test_roles_are_assumable_by_lambda_only(transformed: dict[str, Any]) -> None:
    for name, role in resources_of(transformed, "AWS::IAM::Role").items():
        (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert statement["Principal"] == {"Service": "lambda.amazonaws.com"}, name
        assert statement["Action"] == "sts:AssumeRole", name


def _actions(role: dict[str, Any]) -> dict[str, set[str]]:
    by_action: dict[str, set[str]] = {}
    for action, resource, _ in grants(role):
        by_action.setdefault(action, set()).add(resource)
    return by_action


def test_api_cannot_read_the_stream_query_due_work_or_send_to_a_queue(
    template: dict[str, Any],
) -> None:
    role = template["Resources"]["ApiRole"]
    actions = _actions(role)
    stream_reads = {
        "dynamodb:DescribeStream",
        "dynamodb:GetRecords",
        "dynamodb:GetShardIterator",
        "dynamodb:ListStreams",
    }
    assert not stream_reads & set(actions)
    assert DUE_INDEX_ARN not in actions["dynamodb:Query"]
    assert not any(a.startswith("sqs:") for a in actions)


def test_worker_cannot_write_directory_lookup_or_view_items(
    template: dict[str, Any],
) -> None:
    """Besides attempts, the worker appends to proposal streams only, and only
    to put (the escalation pass's Escalated event and head): never a delete."""
    role = template["Resources"]["WorkerRole"]
    writes = [
        (a, keys or frozenset())
        for a, _, keys in grants(role)
        if a in {"dynamodb:PutItem", "dynamodb:DeleteItem"}
    ]
    writable = {k for _, keys in writes for k in keys}
    assert writable == {ATTEMPTS, DUE, RESTORES, PROPOSALS} | heads(ATTEMPTS, RESTORES, PROPOSALS)
    assert not writable & (DIRECTORY | {LOOKUPS, VIEWS})
    assert [(a, k) for a, k in writes if PROPOSALS in k] == [
        ("dynamodb:PutItem", frozenset({PROPOSALS}) | heads(PROPOSALS))
    ]


def test_no_role_may_scan_update_or_batch_write(template: dict[str, Any]) -> None:
    """UpdateItem only on head entries, each exactly as the role may already put
    (a commit moves a head keeping its bucket); nothing else is updated in place."""
    forbidden = {
        "dynamodb:Scan",
        "dynamodb:UpdateItem",
        "dynamodb:BatchWriteItem",
        "dynamodb:BatchGetItem",
        "dynamodb:DeleteTable",
        "dynamodb:UpdateTable",
        "dynamodb:CreateTable",
        "dynamodb:PartiQLUpdate",
        "dynamodb:PartiQLInsert",
    }
    for role in ("WorkerRole", "ProjectorRole", "ApiRole", "CheckpointRole", "WebhookRole"):
        allowed = (
            {"dynamodb:BatchGetItem", "dynamodb:UpdateItem"}
            if role in ("WorkerRole", "ApiRole")
            else set()
        )
        assert not set(_actions(template["Resources"][role])) & (forbidden - allowed), role
        found = grants(template["Resources"][role])
        updated = {k for a, _, keys in found if a == "dynamodb:UpdateItem" for k in keys or ()}
        put = {
            k
            for a, _, keys in grants(template["Resources"][role])
            if a == "dynamodb:PutItem"
            for k in keys or ()
        }
        assert all(k.startswith(it.HEAD_PREFIX) for k in updated), role
        assert updated <= put, role


def test_only_the_api_may_check_the_layout_and_no_role_may_write_it(
    template: dict[str, Any],
) -> None:
    """The layout record is changed by ``ledger dynamodb migrate`` only (an operator's
    credentials); the API checks it when it changes a directory record."""
    for role in EXPECTED:
        for action, _, keys in grants(template["Resources"][role]):
            if keys and LAYOUT in keys:
                assert (role, action) in {
                    ("ApiRole", "dynamodb:ConditionCheckItem"),
                    ("CheckpointRole", "dynamodb:GetItem"),
                }, (role, action)


@pytest.mark.parametrize("role", ["WorkerRole", "ApiRole"])
def test_batch_reads_are_of_directory_records_and_their_heads_only(
    template: dict[str, Any], role: str
) -> None:
    """The recheck's batched read (the versions stored on Queued) and a cold
    approval's (the head-index entries, then those versions) are scoped to
    directory streams: no proposal, lookup, attempt or view item, and no head
    entry of another stream."""
    batch = [
        keys for a, _, keys in grants(template["Resources"][role]) if a == "dynamodb:BatchGetItem"
    ]
    assert batch == [DIRECTORY | heads(*DIRECTORY)]


def test_only_the_checkpoint_role_touches_s3_and_it_can_only_add_objects(
    template: dict[str, Any],
) -> None:
    for role in ("WorkerRole", "ProjectorRole", "ApiRole", "WebhookRole"):
        assert not any(a.startswith("s3:") for a in _actions(template["Resources"][role])), role
    s3_actions = {
        a for a in _actions(template["Resources"]["CheckpointRole"]) if a.startswith("s3:")
    }
    assert s3_actions == {"s3:PutObject"}  # no delete, no retention or legal-hold change


def test_every_item_write_is_limited_to_key_prefixes(template: dict[str, Any]) -> None:
    for role in ("WorkerRole", "ProjectorRole", "ApiRole", "WebhookRole"):
        for action, _, keys in grants(template["Resources"][role]):
            if action in {
                "dynamodb:PutItem",
                "dynamodb:UpdateItem",
                "dynamodb:DeleteItem",
                "dynamodb:ConditionCheckItem",
            }:
                assert keys, (role, action)
                assert all(k.endswith("*") and len(k) > 1 for k in keys), (role, action)
