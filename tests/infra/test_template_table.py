"""The template's table is the table `ledger dynamodb create-table` makes."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.dynamodb import items as it
from adapters.dynamodb.schema import table_definition


@pytest.fixture(scope="module")
def table(template: dict[str, Any]) -> dict[str, Any]:
    properties: dict[str, Any] = template["Resources"]["LedgerTable"]["Properties"]
    return properties


@pytest.fixture(scope="module")
def expected() -> dict[str, Any]:
    return table_definition("ignored")


def _by(items: list[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    return {item[key]: item for item in items}


def test_key_schema_matches_create_table(table: dict[str, Any], expected: dict[str, Any]) -> None:
    assert table["KeySchema"] == expected["KeySchema"]


def test_attribute_definitions_match_create_table(
    table: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert _by(table["AttributeDefinitions"], "AttributeName") == _by(
        expected["AttributeDefinitions"], "AttributeName"
    )
    assert len(table["AttributeDefinitions"]) == len(expected["AttributeDefinitions"])


def test_global_secondary_indexes_match_create_table(
    table: dict[str, Any], expected: dict[str, Any]
) -> None:
    ours = _by(table["GlobalSecondaryIndexes"], "IndexName")
    theirs = _by(expected["GlobalSecondaryIndexes"], "IndexName")
    assert set(ours) == set(theirs) == {it.DUE_INDEX, it.LIST_INDEX}
    for name, index in theirs.items():
        assert ours[name]["KeySchema"] == index["KeySchema"], name
        projection, wanted = ours[name]["Projection"], index["Projection"]
        assert projection["ProjectionType"] == wanted["ProjectionType"], name
        assert sorted(projection.get("NonKeyAttributes", [])) == sorted(
            wanted.get("NonKeyAttributes", [])
        ), name
        assert set(ours[name]) == {"IndexName", "KeySchema", "Projection"}, name


def test_billing_stream_and_encryption_match_create_table(
    table: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert table["BillingMode"] == expected["BillingMode"] == "PAY_PER_REQUEST"
    assert table["StreamSpecification"] == {
        "StreamViewType": expected["StreamSpecification"]["StreamViewType"]
    }
    assert expected["StreamSpecification"]["StreamEnabled"] is True
    assert table["SSESpecification"] == {
        "SSEEnabled": expected["SSESpecification"]["Enabled"],
        "SSEType": expected["SSESpecification"]["SSEType"],
    }


def test_ttl_and_point_in_time_recovery_are_on(table: dict[str, Any]) -> None:
    # create_table enables these after the table is ACTIVE (enable_ttl / PITR).
    assert table["TimeToLiveSpecification"] == {"AttributeName": it.TTL_ATTRIBUTE, "Enabled": True}
    assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}


def test_the_table_outlives_the_stack(template: dict[str, Any]) -> None:
    resource = template["Resources"]["LedgerTable"]
    assert resource["DeletionPolicy"] == "Retain"
    assert resource["UpdateReplacePolicy"] == "Retain"


def test_every_function_uses_the_template_table(template: dict[str, Any]) -> None:
    variables = template["Globals"]["Function"]["Environment"]["Variables"]
    assert variables["LEDGER_DYNAMODB_TABLE"] == {"Ref": "LedgerTable"}
    assert variables["LEDGER_STORE"] == "dynamodb"


def test_the_table_can_be_named_for_a_restored_table(template: dict[str, Any]) -> None:
    """docs/backup.md: a table restored to a point in time is imported into a stack
    by its name (``LedgerTableName``); empty, CloudFormation names it as before."""
    parameter = template["Parameters"]["LedgerTableName"]
    assert parameter["Default"] == ""
    assert template["Conditions"]["HasLedgerTableName"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "LedgerTableName"}, ""]}]
    }
    assert template["Resources"]["LedgerTable"]["Properties"]["TableName"] == {
        "Fn::If": ["HasLedgerTableName", {"Ref": "LedgerTableName"}, {"Ref": "AWS::NoValue"}]
    }
