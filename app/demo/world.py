"""An in-memory demo world being built: rows per table, with the bookkeeping that keeps ids,
phones, emails and tracking numbers unique. Fixtures and random filler both go through it."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

# The demo backend lives in China Standard Time; no tz database needed for a fixed offset.
CST = timezone(timedelta(hours=8), "CST")

Row = dict[str, Any]


def iso(moment: datetime) -> str:
    return moment.astimezone(CST).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Item:
    product: str
    quantity: int
    unit_cents: int


@dataclass(frozen=True)
class Event:
    time: datetime
    location: str
    description: str


class World:
    def __init__(self) -> None:
        self.rows: defaultdict[str, list[Row]] = defaultdict(list)
        self.order_ids: set[str] = set()
        self.phones: set[str] = set()
        self.emails: set[str] = set()
        self.tracking_numbers: set[str] = set()
        self._seq: Counter[str] = Counter()

    def _next(self, table: str) -> int:
        self._seq[table] += 1
        return self._seq[table]

    def customer(
        self,
        id: str,
        *,
        name: str,
        language: str,
        phone: str,
        email: str,
        address: str,
        created_at: datetime,
    ) -> None:
        if phone in self.phones or email in self.emails:
            raise ValueError(f"customer {id}: phone or email already taken")
        self.phones.add(phone)
        self.emails.add(email)
        self.rows["customers"].append(
            {
                "id": id,
                "name": name,
                "language": language,
                "phone": phone,
                "email": email,
                "address": address,
                "created_at": iso(created_at),
            }
        )

    def order(
        self,
        id: str,
        *,
        customer_id: str,
        status: str,
        items: list[Item],
        ship_to: str,
        created_at: datetime,
        updated_at: datetime,
        currency: str = "CNY",
    ) -> int:
        if id in self.order_ids:
            raise ValueError(f"order {id} already exists")
        self.order_ids.add(id)
        total = sum(i.quantity * i.unit_cents for i in items)
        self.rows["orders"].append(
            {
                "id": id,
                "customer_id": customer_id,
                "status": status,
                "total_cents": total,
                "currency": currency,
                "ship_to": ship_to,
                "created_at": iso(created_at),
                "updated_at": iso(updated_at),
            }
        )
        for line_no, item in enumerate(items, 1):
            self.rows["order_items"].append(
                {
                    "order_id": id,
                    "line_no": line_no,
                    "product": item.product,
                    "quantity": item.quantity,
                    "unit_price_cents": item.unit_cents,
                }
            )
        return total

    def shipment(
        self,
        tracking_number: str,
        *,
        order_id: str,
        carrier: str,
        status: str,
        estimated_delivery: str | None,
        events: list[Event],
    ) -> None:
        if tracking_number in self.tracking_numbers:
            raise ValueError(f"tracking number {tracking_number} already exists")
        self.tracking_numbers.add(tracking_number)
        self.rows["shipments"].append(
            {
                "tracking_number": tracking_number,
                "order_id": order_id,
                "carrier": carrier,
                "status": status,
                "estimated_delivery": estimated_delivery,
                "created_at": iso(events[0].time),
            }
        )
        for seq, event in enumerate(events, 1):
            self.rows["tracking_events"].append(
                {
                    "tracking_number": tracking_number,
                    "seq": seq,
                    "time": iso(event.time),
                    "location": event.location,
                    "description": event.description,
                }
            )

    def ticket(
        self,
        *,
        customer_id: str,
        order_id: str | None,
        category: str,
        priority: str,
        status: str,
        summary: str,
        created_at: datetime,
    ) -> None:
        seq = self._next("tickets")
        self.rows["tickets"].append(
            {
                "seq": seq,
                "id": f"TK{seq:08d}",
                "customer_id": customer_id,
                "order_id": order_id,
                "category": category,
                "priority": priority,
                "status": status,
                "summary": summary,
                "created_at": iso(created_at),
            }
        )

    def refund(
        self,
        *,
        order_id: str,
        customer_id: str,
        amount_cents: int,
        reason: str,
        status: str,
        created_at: datetime,
        currency: str = "CNY",
    ) -> None:
        seq = self._next("refunds")
        self.rows["refunds"].append(
            {
                "seq": seq,
                "id": f"RF{seq:08d}",
                "order_id": order_id,
                "customer_id": customer_id,
                "amount_cents": amount_cents,
                "currency": currency,
                "reason": reason,
                "status": status,
                "created_at": iso(created_at),
            }
        )

    def return_(
        self, *, order_id: str, customer_id: str, reason: str, status: str, created_at: datetime
    ) -> None:
        seq = self._next("returns")
        return_id = f"RT{seq:08d}"
        self.rows["returns"].append(
            {
                "seq": seq,
                "id": return_id,
                "order_id": order_id,
                "customer_id": customer_id,
                "reason": reason,
                "status": status,
                "label_url": label_url(return_id),
                "created_at": iso(created_at),
            }
        )

    def contact_change(
        self, *, customer_id: str, field: str, old_value: str, new_value: str, created_at: datetime
    ) -> None:
        self.rows["contact_changes"].append(
            {
                "seq": self._next("contact_changes"),
                "customer_id": customer_id,
                "field": field,
                "old_value": old_value,
                "new_value": new_value,
                "created_at": iso(created_at),
            }
        )


def label_url(return_id: str) -> str:
    # example.com: a reserved domain, so a demo label link never points at a real site.
    return f"https://returns.example.com/labels/{return_id}.pdf"
