"""After-sales writes: tickets, refunds, returns. Each runs on the demo database's writer
thread inside one transaction, so the checks and the insert see the same state.

Every write first looks for a record created under the same idempotency key and returns it
unchanged: a retried or replayed call never creates a second ticket, refund or return.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime

from app.demo.errors import DemoError, customer_not_found, order_not_found
from app.demo.records import Actor, Refund, Return, Ticket
from app.demo.world import CST, iso, label_url

# Refunds up to this amount are approved at once; larger ones wait for a finance review and
# must name their amount (see request_refund).
AUTO_APPROVE_CENTS = 500_00
REFUNDABLE = ("paid", "shipped", "delivered")


def now() -> str:
    return iso(datetime.now(CST))


def yuan(cents: int) -> str:
    return f"{cents / 100:.2f}"


def replayed(conn: sqlite3.Connection, table: str, actor: Actor) -> sqlite3.Row | None:
    row: sqlite3.Row | None = conn.execute(
        f"SELECT * FROM {table} WHERE idempotency_key = ?", (actor.idempotency_key,)
    ).fetchone()
    if row is not None and row["customer_id"] != actor.user_id:
        raise DemoError("idempotency_conflict", "this request key belongs to another customer")
    return row


def _next_id(conn: sqlite3.Connection, table: str, prefix: str) -> tuple[int, str]:
    seq = int(conn.execute(f"SELECT COALESCE(MAX(seq), 0) + 1 FROM {table}").fetchone()[0])
    return seq, f"{prefix}{seq:08d}"


def require_customer(conn: sqlite3.Connection, customer_id: str) -> sqlite3.Row:
    row: sqlite3.Row | None = conn.execute(
        "SELECT * FROM customers WHERE id = ?", (customer_id,)
    ).fetchone()
    if row is None:
        raise customer_not_found()
    return row


def _own_order(conn: sqlite3.Connection, actor: Actor, order_id: str) -> sqlite3.Row:
    row: sqlite3.Row | None = conn.execute(
        "SELECT * FROM orders WHERE id = ? AND customer_id = ?", (order_id, actor.user_id)
    ).fetchone()
    if row is None:
        raise order_not_found(order_id)
    return row


def _ticket(row: sqlite3.Row) -> Ticket:
    return Ticket(
        row["id"],
        row["customer_id"],
        row["order_id"],
        row["category"],
        row["priority"],
        row["status"],
        row["summary"],
        row["created_at"],
    )


def create_ticket(
    conn: sqlite3.Connection,
    actor: Actor,
    *,
    category: str,
    summary: str,
    priority: str,
    order_id: str | None,
) -> Ticket:
    if (row := replayed(conn, "tickets", actor)) is not None:
        return _ticket(row)
    require_customer(conn, actor.user_id)
    if order_id is not None:
        _own_order(conn, actor, order_id)
    seq, ticket_id = _next_id(conn, "tickets", "TK")
    conn.execute(
        "INSERT INTO tickets (seq, id, customer_id, order_id, category, priority, status,"
        " summary, created_at, tenant_id, session_id, idempotency_key)"
        " VALUES (?, ?, ?, ?, ?, ?, 'open', ?, ?, ?, ?, ?)",
        (seq, ticket_id, actor.user_id, order_id, category, priority, summary, now(),
         actor.tenant_id, actor.session_id, actor.idempotency_key),
    )  # fmt: skip
    return _ticket(conn.execute("SELECT * FROM tickets WHERE seq = ?", (seq,)).fetchone())


def _refund(row: sqlite3.Row) -> Refund:
    return Refund(
        row["id"],
        row["order_id"],
        row["amount_cents"],
        row["currency"],
        row["status"],
        row["created_at"],
    )


def refund_refusal(
    conn: sqlite3.Connection, actor: Actor, *, order_id: str, amount_cents: int | None
) -> DemoError | None:
    """Why `request_refund` would refuse this refund now, or None if it would file it (or
    return the one already filed under the actor's key). The same checks, asked before a
    human is asked to approve: nobody should approve a refund the backend then refuses."""
    if replayed(conn, "refunds", actor) is not None:
        return None
    try:
        _refundable(conn, actor, order_id, amount_cents)
    except DemoError as exc:
        return exc
    return None


def _refundable(
    conn: sqlite3.Connection, actor: Actor, order_id: str, amount_cents: int | None
) -> tuple[sqlite3.Row, int, int]:
    """The order, the amount to refund and what was already refunded on it; a DemoError
    when the refund cannot be made."""
    order = _own_order(conn, actor, order_id)
    status, total, currency = order["status"], order["total_cents"], order["currency"]
    if status == "pending":
        raise DemoError(
            "order_not_paid", f"order {order_id} has not been paid, so there is nothing to refund"
        )
    if status not in REFUNDABLE:
        raise DemoError(
            "order_not_refundable",
            f"order {order_id} is {status}; it cannot be refunded again",
        )
    if amount_cents is None and total > AUTO_APPROVE_CENTS:
        # The approval rule (tools.yaml) can only see an amount that is passed: a large
        # refund by default would slip past it.
        raise DemoError(
            "amount_required",
            f"order {order_id} totals {yuan(total)} {currency}, above {yuan(AUTO_APPROVE_CENTS)}:"
            f" call again with amount set explicitly (e.g. {yuan(total)}) so a human can approve",
        )
    amount = total if amount_cents is None else amount_cents
    if amount <= 0:
        raise DemoError("invalid_amount", "the refund amount must be at least 0.01")
    if amount > total:
        raise DemoError(
            "amount_exceeds_total",
            f"the refund amount {yuan(amount)} is more than the order total "
            f"{yuan(total)} {currency}; ask for an amount up to the order total",
        )
    already = int(
        conn.execute(
            "SELECT COALESCE(SUM(amount_cents), 0) FROM refunds"
            " WHERE order_id = ? AND status != 'rejected'",
            (order_id,),
        ).fetchone()[0]
    )
    if amount > total - already:
        raise DemoError(
            "amount_exceeds_refundable",
            f"{yuan(already)} {currency} of order {order_id} has already been refunded or is "
            f"under review; at most {yuan(total - already)} {currency} can still be refunded",
        )
    return order, amount, already


def request_refund(
    conn: sqlite3.Connection,
    actor: Actor,
    *,
    order_id: str,
    amount_cents: int | None,
    reason: str | None,
) -> Refund:
    if (row := replayed(conn, "refunds", actor)) is not None:
        return _refund(row)
    order, amount, already = _refundable(conn, actor, order_id, amount_cents)
    total, currency = order["total_cents"], order["currency"]
    decision = "approved" if amount <= AUTO_APPROVE_CENTS else "pending_review"
    stamp = now()
    seq, refund_id = _next_id(conn, "refunds", "RF")
    conn.execute(
        "INSERT INTO refunds (seq, id, order_id, customer_id, amount_cents, currency, reason,"
        " status, created_at, tenant_id, session_id, idempotency_key)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (seq, refund_id, order_id, actor.user_id, amount, currency, reason, decision, stamp,
         actor.tenant_id, actor.session_id, actor.idempotency_key),
    )  # fmt: skip
    if decision == "approved" and already + amount == total:
        conn.execute(
            "UPDATE orders SET status = 'refunded', updated_at = ? WHERE id = ?",
            (stamp, order_id),
        )
    return _refund(conn.execute("SELECT * FROM refunds WHERE seq = ?", (seq,)).fetchone())


def _return(row: sqlite3.Row) -> Return:
    return Return(row["id"], row["order_id"], row["status"], row["label_url"], row["created_at"])


def return_refusal(conn: sqlite3.Connection, actor: Actor, *, order_id: str) -> DemoError | None:
    """Why `request_return` would refuse this return now, or None: asked before the customer
    is asked to confirm a return the backend would then refuse."""
    if replayed(conn, "returns", actor) is not None:
        return None
    try:
        _returnable(conn, actor, order_id)
    except DemoError as exc:
        return exc
    return None


def _returnable(conn: sqlite3.Connection, actor: Actor, order_id: str) -> None:
    order = _own_order(conn, actor, order_id)
    if order["status"] != "delivered":
        raise DemoError(
            "order_not_returnable",
            f"only delivered orders can be returned; order {order_id} is {order['status']}",
        )
    open_return = conn.execute(
        "SELECT id FROM returns WHERE order_id = ? AND status NOT IN ('cancelled', 'rejected')",
        (order_id,),
    ).fetchone()
    if open_return is not None:
        raise DemoError(
            "return_already_requested",
            f"return {open_return['id']} already exists for order {order_id}",
        )


def request_return(
    conn: sqlite3.Connection, actor: Actor, *, order_id: str, reason: str | None
) -> Return:
    if (row := replayed(conn, "returns", actor)) is not None:
        return _return(row)
    _returnable(conn, actor, order_id)
    seq, return_id = _next_id(conn, "returns", "RT")
    conn.execute(
        "INSERT INTO returns (seq, id, order_id, customer_id, reason, status, label_url,"
        " created_at, tenant_id, session_id, idempotency_key)"
        " VALUES (?, ?, ?, ?, ?, 'created', ?, ?, ?, ?, ?)",
        (seq, return_id, order_id, actor.user_id, reason, label_url(return_id), now(),
         actor.tenant_id, actor.session_id, actor.idempotency_key),
    )  # fmt: skip
    return _return(conn.execute("SELECT * FROM returns WHERE seq = ?", (seq,)).fetchone())
