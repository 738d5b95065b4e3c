"""The status view in the published OpenAPI document keeps its contract: the
names, types and required-ness clients were generated from, now derived from
the one definition of the view (``projections.status.AttemptStatusView``)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from projections.status import VIEW_FIELDS

API = "/api/conversational"
NULLABLE_STRING = {"anyOf": [{"type": "string"}, {"type": "null"}]}


def shape(schema: dict[str, Any]) -> dict[str, Any]:
    """A property's type, without its title and description."""
    return {k: v for k, v in schema.items() if k not in ("title", "description")}


def test_the_published_status_view_keeps_its_names_types_and_required_fields(
    client: TestClient,
) -> None:
    spec = client.get("/openapi.json").json()
    ok = spec["paths"][API + "/execution-attempts/{attempt_id}"]["get"]["responses"]["200"]
    assert ok["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/AttemptOut"
    }
    schemas = spec["components"]["schemas"]
    out = schemas["AttemptOut"]
    assert out["additionalProperties"] is False
    assert out["required"] == [
        "attempt_id",
        "proposal_id",
        "proposal_version",
        "status",
        "revision",
        "delivery_mode",
        "created_at",
        "updated_at",
        "lease_generation",
    ]
    assert {name: shape(p) for name, p in out["properties"].items()} == {
        "attempt_id": {"type": "string"},
        "proposal_id": {"type": "string"},
        "proposal_version": {"type": "integer"},
        "status": {"type": "string"},
        "revision": {"type": "integer"},
        "delivery_mode": {"type": "string"},
        "created_at": {"type": "string"},
        "updated_at": {"type": "string"},
        "lease_generation": {"type": "integer"},
        "dispatch_started_at": NULLABLE_STRING,
        "approval": {"anyOf": [{"$ref": "#/components/schemas/AttemptApproval"}, {"type": "null"}]},
        "result": {"anyOf": [{"$ref": "#/components/schemas/AttemptResult"}, {"type": "null"}]},
        "resolution": {
            "anyOf": [{"$ref": "#/components/schemas/AttemptResolution"}, {"type": "null"}]
        },
        "acknowledgement": {
            "anyOf": [{"$ref": "#/components/schemas/AttemptAcknowledgement"}, {"type": "null"}]
        },
    }
    assert list(out["properties"]) == list(VIEW_FIELDS)
    assert all(p.get("description") for p in out["properties"].values())
    result, resolution = schemas["AttemptResult"], schemas["AttemptResolution"]
    assert result["required"] == ["kind"]
    assert {n: shape(p) for n, p in result["properties"].items()} == {
        "kind": {"type": "string"},
        "reason_code": NULLABLE_STRING,
        "receipt": {"anyOf": [{"type": "object", "additionalProperties": True}, {"type": "null"}]},
    }
    assert resolution["required"] == ["outcome", "reason", "resolved_by", "resolved_at"]
    assert {shape(p)["type"] for p in resolution["properties"].values()} == {"string"}
    acknowledgement = schemas["AttemptAcknowledgement"]
    assert acknowledgement["required"] == ["acknowledged_by", "note", "at"]
    listed = schemas["AttemptListOut"]["properties"]["items"]
    assert listed == {
        "items": {"$ref": "#/components/schemas/AttemptOut"},
        "type": "array",
        "title": "Items",
    }
