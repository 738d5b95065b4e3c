"""Schemas of the webhook-delivery routes (admin)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class DeliveryOut(BaseModel):
    """One delivery record: a notification for one subscription and where its
    sending stands (never its body or the subscription's secret)."""

    model_config = ConfigDict(extra="forbid")

    delivery_id: str
    subscription_id: str
    notification_id: str
    type: str
    subject_id: str
    subject_version: int
    status: str
    attempts: int
    next_try_at: str
    last_error: str | None = None
    response_status: int | None = None
    created_at: str
    updated_at: str
    delivered_at: str | None = None


class DeliveryListOut(BaseModel):
    """A page of delivery records in one status, oldest fact first."""

    items: list[DeliveryOut]
    next_cursor: str | None = None
