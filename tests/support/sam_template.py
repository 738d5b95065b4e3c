"""Reading infra/template.yaml the way CloudFormation and SAM do, offline."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from unittest import mock

INFRA = Path(__file__).resolve().parents[2] / "infra"
TEMPLATE = INFRA / "template.yaml"
PARAMETERS = {
    "AuthRs256PublicKey": "-----BEGIN PUBLIC KEY-----\\nMIIB\\n-----END PUBLIC KEY-----",
}
PACKAGED_CODE = "s3://example-bucket/ledger.zip"  # what `sam package` puts in CodeUri
FUNCTIONS = (
    "WorkerFunction",
    "ProjectorFunction",
    "ApiFunction",
    "CheckpointFunction",
    "WebhookFunction",
)


def load_template() -> dict[str, Any]:
    """The template as plain data; short-form intrinsics become their long form."""
    from cfnlint.decode.cfn_yaml import load

    data: dict[str, Any] = json.loads(json.dumps(load(str(TEMPLATE))))
    return data


class NoManagedPolicies:
    """The translator's managed-policy loader, offline: the template names none."""

    def load(self) -> dict[str, str]:
        return {}


def transform_template(template: Mapping[str, Any]) -> dict[str, Any]:
    """The CloudFormation template SAM makes of it (after `sam package`)."""
    from samtranslator.translator.transform import transform

    packaged = copy.deepcopy(dict(template))
    packaged["Globals"]["Function"]["CodeUri"] = PACKAGED_CODE
    # The translator derives the ARN partition from the region; any region will do.
    with mock.patch.dict(os.environ, {"AWS_DEFAULT_REGION": "us-east-1"}):
        result = transform(packaged, dict(PARAMETERS), NoManagedPolicies())
    plain: dict[str, Any] = json.loads(json.dumps(result))
    return plain


def resources_of(template: Mapping[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {
        name: resource
        for name, resource in template["Resources"].items()
        if resource["Type"] == kind
    }


def statements(role: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every statement of a role's inline policies."""
    found: list[dict[str, Any]] = []
    for policy in role["Properties"].get("Policies", []):
        found.extend(policy["PolicyDocument"]["Statement"])
    return found


def as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def leading_keys(statement: Mapping[str, Any]) -> set[str] | None:
    """The partition-key patterns a statement is limited to, or None when unlimited."""
    condition = statement.get("Condition", {}).get("ForAllValues:StringLike", {})
    keys = condition.get("dynamodb:LeadingKeys")
    return None if keys is None else set(as_list(keys))


def grants(role: Mapping[str, Any]) -> Iterator[tuple[str, str, frozenset[str] | None]]:
    """(action, resource as JSON text, leading-key patterns) for every Allow."""
    for statement in statements(role):
        assert statement["Effect"] == "Allow"
        keys = leading_keys(statement)
        for action in as_list(statement["Action"]):
            for resource in as_list(statement["Resource"]):
                yield (
                    action,
                    json.dumps(resource, sort_keys=True),
                    (frozenset(keys) if keys is not None else None),
                )


def ref(name: str) -> str:
    return json.dumps({"Ref": name}, sort_keys=True)


def get_att(name: str, attribute: str) -> str:
    return json.dumps({"Fn::GetAtt": [name, attribute]}, sort_keys=True)


def sub(text: str) -> str:
    return json.dumps({"Fn::Sub": text}, sort_keys=True)


TABLE_ARN = get_att("LedgerTable", "Arn")
STREAM_ARN = get_att("LedgerTable", "StreamArn")
DUE_INDEX_ARN = sub("${LedgerTable.Arn}/index/due")
LIST_INDEX_ARN = sub("${LedgerTable.Arn}/index/list")
TABLE_STREAMS_ARN = sub("${LedgerTable.Arn}/stream/*")
CHECKPOINT_OBJECTS_ARN = sub("${AuditCheckpointBucket.Arn}/digests/*")


def matches(pattern: Any, event: Any) -> bool:
    """Lambda event filtering for the pattern forms the template uses: nested
    objects, lists of exact values, and ``{"prefix": ...}``."""
    if isinstance(pattern, Mapping):
        if not isinstance(event, Mapping):
            return False
        return all(key in event and matches(value, event[key]) for key, value in pattern.items())
    if isinstance(pattern, list):
        for option in pattern:
            if isinstance(option, Mapping) and set(option) == {"prefix"}:
                if isinstance(event, str) and event.startswith(option["prefix"]):
                    return True
            elif option == event:
                return True
        return False
    raise AssertionError(f"unsupported pattern form {pattern!r}")


def filter_patterns(function: Mapping[str, Any], event_name: str) -> list[dict[str, Any]]:
    source = function["Properties"]["Events"][event_name]["Properties"]
    return [json.loads(f["Pattern"]) for f in source["FilterCriteria"]["Filters"]]


def passes(patterns: list[dict[str, Any]], record: Mapping[str, Any]) -> bool:
    """Lambda invokes with a record if any filter matches it."""
    return any(matches(pattern, record) for pattern in patterns)
