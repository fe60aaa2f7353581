"""Async access to the demo backend for tool handlers.

Built on `app.storage.sqlite.Database`: every write goes through its single writer thread
(checks and changes in one transaction; a write of the demo backend belongs to no Hermes
session: `NO_SESSION`), reads use its aiosqlite connections; nothing here blocks the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from app.demo import account, actions, outbox
from app.demo.errors import DemoError, customer_not_found, order_not_found
from app.demo.mail import MailComposeError, MailDeliveryError, Mailer, compose
from app.demo.outbox import Draft
from app.demo.records import (
    Actor,
    ContactChange,
    Customer,
    Email,
    Order,
    OrderLine,
    PasswordReset,
    Refund,
    Return,
    Shipment,
    Ticket,
    TrackingEvent,
)
from app.demo.world import CST, iso
from app.storage.session_writer import NO_SESSION
from app.storage.sqlite import SqliteDatabase


def _stamp(epoch: float) -> str:
    """An epoch time as the demo stores times (ISO 8601 in China Standard Time), so that
    string comparison orders them."""
    return iso(datetime.fromtimestamp(epoch, CST))


class DemoStore:
    """The demo backend. Its data belongs to `tenants`: a session of any other tenant acts as
    a customer who does not exist, so it finds no customer, order or shipment, exactly as
    for an unknown id (the same user id in two tenants is two different people)."""

    def __init__(
        self,
        path: Path | str,
        *,
        tenants: Iterable[str] = ("default",),
        read_connections: int = 2,
    ) -> None:
        self.path = Path(path)
        self.tenants = frozenset(tenants)
        self.db = SqliteDatabase(self.path, read_connections=read_connections)
        # A `sending` outbox row younger than this belongs to a live attempt.
        self.email_stale_after_s = 120.0
        self._deliveries: set[asyncio.Task[Email]] = set()

    async def open(self) -> DemoStore:
        await self.db.open()
        return self

    async def close(self, *, drain_s: float = 30.0) -> None:
        # Let emails already handed to the server record their outcome before the file closes.
        if self._deliveries:
            _done, late = await asyncio.wait(self._deliveries, timeout=drain_s)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        await self.db.close()

    def owns(self, tenant_id: str) -> bool:
        return tenant_id in self.tenants

    # -- reads --------------------------------------------------------------------------------

    async def customer(self, tenant_id: str, customer_id: str) -> Customer | None:
        if not self.owns(tenant_id):
            return None
        row = await self.db.fetchone(
            "SELECT id, name, language, phone, email, address FROM customers WHERE id = ?",
            (customer_id,),
        )
        return None if row is None else Customer(*row)

    async def order_for(self, tenant_id: str, customer_id: str, order_id: str) -> Order | None:
        """The order if it exists *and* belongs to the tenant's customer; None otherwise,
        alike."""
        if not self.owns(tenant_id):
            return None
        row = await self.db.fetchone(
            "SELECT o.*, c.language, s.tracking_number, s.carrier FROM orders o"
            " JOIN customers c ON c.id = o.customer_id"
            " LEFT JOIN shipments s ON s.order_id = o.id"
            " WHERE o.id = ? AND o.customer_id = ?",
            (order_id, customer_id),
        )
        if row is None:
            return None
        lines = await self.db.fetchall(
            "SELECT product, quantity, unit_price_cents FROM order_items"
            " WHERE order_id = ? ORDER BY line_no",
            (order_id,),
        )
        return Order(
            id=row["id"],
            customer_id=row["customer_id"],
            status=row["status"],
            total_cents=row["total_cents"],
            currency=row["currency"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            language=row["language"],
            tracking_number=row["tracking_number"],
            carrier=row["carrier"],
            lines=tuple(OrderLine(*line) for line in lines),
        )

    async def shipment_for(
        self, tenant_id: str, customer_id: str, tracking_number: str
    ) -> Shipment | None:
        """The shipment if its order belongs to the tenant's customer; None otherwise, alike."""
        if not self.owns(tenant_id):
            return None
        row = await self.db.fetchone(
            "SELECT s.* FROM shipments s JOIN orders o ON o.id = s.order_id"
            " WHERE s.tracking_number = ? AND o.customer_id = ?",
            (tracking_number, customer_id),
        )
        if row is None:
            return None
        events = await self.db.fetchall(
            "SELECT time, location, description FROM tracking_events"
            " WHERE tracking_number = ? ORDER BY seq DESC",
            (tracking_number,),
        )
        return Shipment(
            tracking_number=row["tracking_number"],
            order_id=row["order_id"],
            carrier=row["carrier"],
            status=row["status"],
            estimated_delivery=row["estimated_delivery"],
            events=tuple(TrackingEvent(*e) for e in events),
        )

    # -- history, for the rules over what was already done (app/tools/policy/history.py) -----

    async def refunded_cents(
        self,
        tenant_id: str,
        customer_id: str,
        *,
        order_id: str | None = None,
        since: float | None = None,
    ) -> int:
        """Refunds of the customer not rejected: on one order, and/or since a moment."""
        if not self.owns(tenant_id):
            return 0
        sql = (
            "SELECT COALESCE(SUM(amount_cents), 0) FROM refunds"
            " WHERE customer_id = ? AND status != 'rejected'"
        )
        params: list[object] = [customer_id]
        if order_id is not None:
            sql += " AND order_id = ?"
            params.append(order_id)
        if since is not None:
            sql += " AND created_at >= ?"
            params.append(_stamp(since))
        row = await self.db.fetchone(sql, params)
        return int(row[0]) if row is not None else 0

    async def contact_changes(
        self, tenant_id: str, customer_id: str, *, session_id: str, since: float | None
    ) -> int:
        """Contact changes of the customer in this session or since a moment."""
        if not self.owns(tenant_id):
            return 0
        sql = "SELECT COUNT(*) FROM contact_changes WHERE customer_id = ? AND (session_id = ?"
        params: list[object] = [customer_id, session_id]
        if since is not None:
            sql += " OR created_at >= ?"
            params.append(_stamp(since))
        row = await self.db.fetchone(sql + ")", params)
        return int(row[0]) if row is not None else 0

    # -- writes (one transaction each, on the writer thread) ----------------------------------

    # A tenant outside the dataset gets the refusal the action gives a customer who does not
    # exist: its first lookup (customer or order) finds nothing.

    async def create_ticket(
        self, actor: Actor, *, category: str, summary: str, priority: str, order_id: str | None
    ) -> Ticket:
        self._admit(actor)
        return await self.db.write(
            NO_SESSION,
            lambda c: actions.create_ticket(
                c, actor, category=category, summary=summary, priority=priority, order_id=order_id
            ),
        )

    async def request_refund(
        self, actor: Actor, *, order_id: str, amount_cents: int | None, reason: str | None
    ) -> Refund:
        self._admit(actor, order_id)
        return await self.db.write(
            NO_SESSION,
            lambda c: actions.request_refund(
                c, actor, order_id=order_id, amount_cents=amount_cents, reason=reason
            ),
        )

    async def refund_refusal(
        self, actor: Actor, *, order_id: str, amount_cents: int | None
    ) -> DemoError | None:
        """Why `request_refund` would refuse this refund now, or None; changes nothing. Asked
        on the writer thread so it sees exactly what the refund itself would see."""
        if not self.owns(actor.tenant_id):
            return order_not_found(order_id)
        return await self.db.write(
            NO_SESSION,
            lambda c: actions.refund_refusal(
                c, actor, order_id=order_id, amount_cents=amount_cents
            ),
        )

    async def return_refusal(self, actor: Actor, *, order_id: str) -> DemoError | None:
        """Why `request_return` would refuse this return now, or None; changes nothing."""
        if not self.owns(actor.tenant_id):
            return order_not_found(order_id)
        return await self.db.write(
            NO_SESSION, lambda c: actions.return_refusal(c, actor, order_id=order_id)
        )

    async def request_return(self, actor: Actor, *, order_id: str, reason: str | None) -> Return:
        self._admit(actor, order_id)
        return await self.db.write(
            NO_SESSION, lambda c: actions.request_return(c, actor, order_id=order_id, reason=reason)
        )

    async def reset_password(self, actor: Actor, *, phone: str) -> PasswordReset:
        self._admit(actor)
        return await self.db.write(
            NO_SESSION, lambda c: account.reset_password(c, actor, phone=phone)
        )

    async def update_contact(self, actor: Actor, *, field: str, value: str) -> ContactChange:
        self._admit(actor)
        return await self.db.write(
            NO_SESSION, lambda c: account.update_contact(c, actor, field=field, value=value)
        )

    def _admit(self, actor: Actor, order_id: str | None = None) -> None:
        if self.owns(actor.tenant_id):
            return
        raise customer_not_found() if order_id is None else order_not_found(order_id)

    # -- email --------------------------------------------------------------------------------

    async def send_email(self, actor: Actor, draft: Draft, mailer: Mailer) -> Email:
        """Send once per idempotency key: claim the outbox row, deliver, mark the outcome."""
        claimed = await self.db.write(
            NO_SESSION, lambda c: outbox.claim(c, actor, draft, self.email_stale_after_s)
        )
        if claimed.status == "sent":
            return claimed
        # Shielded: if the caller times out mid-send, delivery and its mark still finish, so
        # the outbox never forgets an email that did go out.
        delivery = asyncio.ensure_future(self._deliver(claimed, mailer))
        self._deliveries.add(delivery)
        delivery.add_done_callback(self._delivery_done)
        return await asyncio.shield(delivery)

    def _delivery_done(self, task: asyncio.Task[Email]) -> None:
        self._deliveries.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved here: the caller may have stopped listening

    async def _deliver(self, email: Email, mailer: Mailer) -> Email:
        key, attempt = email.idempotency_key, email.attempts
        # Everything after the claim is inside the try: whatever fails (building the message,
        # sending it), the row ends `failed` with the reason, never stuck in `sending`.
        try:
            message = compose(
                message_id=email.message_id,
                sender=email.sender,
                to=email.recipient,
                subject=email.subject,
                body=email.body,
            )
            await mailer.send(message)
        except Exception as exc:
            # Failed means "may be retried with the same key"; the error says why.
            error = (
                str(exc)
                if isinstance(exc, MailDeliveryError | MailComposeError)
                else type(exc).__name__
            )
            await self.db.write(NO_SESSION, lambda c: outbox.mark_failed(c, key, attempt, error))
            raise
        await self.db.write(NO_SESSION, lambda c: outbox.mark_sent(c, key, attempt))
        return await self.db.write(NO_SESSION, lambda c: outbox.load(c, key))
