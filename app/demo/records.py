"""What the demo backend hands back: plain frozen records, money in cents."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Customer:
    id: str
    name: str
    language: str
    phone: str
    email: str
    address: str


@dataclass(frozen=True)
class OrderLine:
    product: str
    quantity: int
    unit_price_cents: int


@dataclass(frozen=True)
class Order:
    id: str
    customer_id: str
    status: str
    total_cents: int
    currency: str
    created_at: str
    updated_at: str
    language: str  # the customer's, for status wording
    tracking_number: str | None
    carrier: str | None
    lines: tuple[OrderLine, ...]


@dataclass(frozen=True)
class TrackingEvent:
    time: str
    location: str
    description: str


@dataclass(frozen=True)
class Shipment:
    tracking_number: str
    order_id: str
    carrier: str
    status: str
    estimated_delivery: str | None
    events: tuple[TrackingEvent, ...]  # newest first


@dataclass(frozen=True)
class Ticket:
    id: str
    customer_id: str
    order_id: str | None
    category: str
    priority: str
    status: str
    summary: str
    created_at: str


@dataclass(frozen=True)
class Refund:
    id: str
    order_id: str
    amount_cents: int
    currency: str
    status: str
    created_at: str


@dataclass(frozen=True)
class Return:
    id: str
    order_id: str
    status: str
    label_url: str
    created_at: str


@dataclass(frozen=True)
class PasswordReset:
    customer_id: str
    phone: str
    channel: str
    created_at: str


@dataclass(frozen=True)
class ContactChange:
    customer_id: str
    field: str
    new_value: str
    created_at: str


@dataclass(frozen=True)
class Email:
    idempotency_key: str
    message_id: str
    sender: str
    recipient: str
    subject: str
    body: str
    status: str  # sending | sent | failed
    attempts: int


@dataclass(frozen=True)
class Actor:
    """Who asks for a change, and the idempotency key of the call asking."""

    tenant_id: str
    user_id: str
    session_id: str
    idempotency_key: str
