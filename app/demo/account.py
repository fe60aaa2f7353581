"""Account writes: password-reset links and contact details, checked against the session's
customer. Like the after-sales writes, a repeated idempotency key returns the first result."""

from __future__ import annotations

import re
import sqlite3

from app.demo.actions import now, replayed, require_customer
from app.demo.errors import DemoError
from app.demo.records import Actor, ContactChange, PasswordReset

_CN_MOBILE = re.compile(r"^1\d{10}$")
_E164 = re.compile(r"^\+\d{8,15}$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s.]+$")


def national(phone: str) -> str:
    """`+8613800138000` and `13800138000` are the same line; compare them as the latter."""
    phone = re.sub(r"[\s-]", "", phone)
    if phone.startswith("+86") and _CN_MOBILE.match(phone[3:]):
        return phone[3:]
    return phone


def reset_password(conn: sqlite3.Connection, actor: Actor, *, phone: str) -> PasswordReset:
    if (row := replayed(conn, "password_resets", actor)) is not None:
        return PasswordReset(row["customer_id"], row["phone"], row["channel"], row["created_at"])
    customer = require_customer(conn, actor.user_id)
    if national(phone) != national(customer["phone"]):
        # Never say which number is on file: the caller may be guessing.
        raise DemoError(
            "phone_mismatch",
            "this phone number is not the one registered to the account; ask the customer to "
            "give the mobile number they registered with, do not suggest one",
        )
    stamp = now()
    conn.execute(
        "INSERT INTO password_resets (customer_id, phone, channel, created_at, tenant_id,"
        " session_id, idempotency_key) VALUES (?, ?, 'sms', ?, ?, ?, ?)",
        (actor.user_id, customer["phone"], stamp, actor.tenant_id, actor.session_id,
         actor.idempotency_key),
    )  # fmt: skip
    return PasswordReset(actor.user_id, customer["phone"], "sms", stamp)


def normalize_contact(field: str, value: str) -> str:
    value = value.strip()
    if field == "phone":
        phone = national(value)
        if not (_CN_MOBILE.match(phone) or _E164.match(phone)):
            raise DemoError(
                "invalid_value",
                f"{value!r} is not a phone number: give an 11-digit mainland mobile number "
                "(e.g. 13912345678) or an international number starting with + (E.164)",
            )
        return phone
    if field == "email":
        if len(value) > 254 or not _EMAIL.match(value):
            raise DemoError(
                "invalid_value", f"{value!r} is not an email address like name@example.com"
            )
        return value.lower()
    if not 5 <= len(value) <= 200:
        raise DemoError(
            "invalid_value", "an address must be 5 to 200 characters, with city and street"
        )
    return value


def update_contact(
    conn: sqlite3.Connection, actor: Actor, *, field: str, value: str
) -> ContactChange:
    if (row := replayed(conn, "contact_changes", actor)) is not None:
        return ContactChange(row["customer_id"], row["field"], row["new_value"], row["created_at"])
    if field not in ("phone", "email", "address"):
        raise DemoError("invalid_field", f"{field!r} cannot be changed (phone, email or address)")
    customer = require_customer(conn, actor.user_id)
    new = normalize_contact(field, value)
    if new == customer[field]:
        raise DemoError("value_unchanged", f"the account already has this {field}")
    if field in ("phone", "email"):
        taken = conn.execute(
            f"SELECT 1 FROM customers WHERE {field} = ? AND id != ?", (new, actor.user_id)
        ).fetchone()
        if taken is not None:
            raise DemoError(
                "value_not_allowed",
                f"this {field} cannot be used for this account; ask for a different one",
            )
    stamp = now()
    conn.execute(f"UPDATE customers SET {field} = ? WHERE id = ?", (new, actor.user_id))
    conn.execute(
        "INSERT INTO contact_changes (customer_id, field, old_value, new_value, created_at,"
        " tenant_id, session_id, idempotency_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (actor.user_id, field, customer[field], new, stamp, actor.tenant_id, actor.session_id,
         actor.idempotency_key),
    )  # fmt: skip
    return ContactChange(actor.user_id, field, new, stamp)
