"""Tables of the demo backend. Money is stored in cents so sums and limits are exact."""

from __future__ import annotations

# Bump when the tables change: an older file is refused with a "regenerate" hint.
SCHEMA_VERSION = 1

DDL = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE customers (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    language   TEXT NOT NULL CHECK (language IN ('zh', 'en')),
    phone      TEXT NOT NULL UNIQUE,
    email      TEXT NOT NULL UNIQUE,
    address    TEXT NOT NULL,
    created_at TEXT NOT NULL
);

CREATE TABLE orders (
    id           TEXT PRIMARY KEY CHECK (length(id) = 12),
    customer_id  TEXT NOT NULL REFERENCES customers (id),
    status       TEXT NOT NULL CHECK (status IN
                     ('pending', 'paid', 'shipped', 'delivered', 'cancelled', 'refunded')),
    total_cents  INTEGER NOT NULL CHECK (total_cents >= 0),
    currency     TEXT NOT NULL,
    ship_to      TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);
CREATE INDEX orders_customer ON orders (customer_id, created_at);

CREATE TABLE order_items (
    order_id         TEXT NOT NULL REFERENCES orders (id),
    line_no          INTEGER NOT NULL,
    product          TEXT NOT NULL,
    quantity         INTEGER NOT NULL CHECK (quantity > 0),
    unit_price_cents INTEGER NOT NULL CHECK (unit_price_cents >= 0),
    PRIMARY KEY (order_id, line_no)
);

CREATE TABLE shipments (
    tracking_number    TEXT PRIMARY KEY,
    order_id           TEXT NOT NULL UNIQUE REFERENCES orders (id),
    carrier            TEXT NOT NULL,
    status             TEXT NOT NULL CHECK (status IN
                           ('created', 'in_transit', 'out_for_delivery', 'delivered',
                            'exception')),
    estimated_delivery TEXT,
    created_at         TEXT NOT NULL
);

CREATE TABLE tracking_events (
    tracking_number TEXT NOT NULL REFERENCES shipments (tracking_number),
    seq             INTEGER NOT NULL,
    time            TEXT NOT NULL,
    location        TEXT NOT NULL,
    description     TEXT NOT NULL,
    PRIMARY KEY (tracking_number, seq)
);

-- Records the tools create carry the idempotency key of the call that created them
-- (NULL for generated history): a repeated key finds the first record instead of a second.
CREATE TABLE tickets (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    customer_id     TEXT NOT NULL REFERENCES customers (id),
    order_id        TEXT REFERENCES orders (id),
    category        TEXT NOT NULL,
    priority        TEXT NOT NULL,
    status          TEXT NOT NULL,
    summary         TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    tenant_id       TEXT,
    session_id      TEXT,
    idempotency_key TEXT UNIQUE
);

CREATE TABLE refunds (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    order_id        TEXT NOT NULL REFERENCES orders (id),
    customer_id     TEXT NOT NULL REFERENCES customers (id),
    amount_cents    INTEGER NOT NULL CHECK (amount_cents > 0),
    currency        TEXT NOT NULL,
    reason          TEXT,
    status          TEXT NOT NULL CHECK (status IN ('pending_review', 'approved', 'rejected')),
    created_at      TEXT NOT NULL,
    tenant_id       TEXT,
    session_id      TEXT,
    idempotency_key TEXT UNIQUE
);
CREATE INDEX refunds_order ON refunds (order_id);

CREATE TABLE returns (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    order_id        TEXT NOT NULL REFERENCES orders (id),
    customer_id     TEXT NOT NULL REFERENCES customers (id),
    reason          TEXT,
    status          TEXT NOT NULL,
    label_url       TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    tenant_id       TEXT,
    session_id      TEXT,
    idempotency_key TEXT UNIQUE
);
CREATE INDEX returns_order ON returns (order_id);

CREATE TABLE contact_changes (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    customer_id     TEXT NOT NULL REFERENCES customers (id),
    field           TEXT NOT NULL CHECK (field IN ('phone', 'email', 'address')),
    old_value       TEXT NOT NULL,
    new_value       TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    tenant_id       TEXT,
    session_id      TEXT,
    idempotency_key TEXT UNIQUE
);

-- Reset links "sent" by SMS: the demo has no SMS gateway, so the outbox is the record.
CREATE TABLE password_resets (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    customer_id     TEXT NOT NULL REFERENCES customers (id),
    phone           TEXT NOT NULL,
    channel         TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    tenant_id       TEXT,
    session_id      TEXT,
    idempotency_key TEXT UNIQUE
);

-- One row per email the send_email tool was asked to send; `status` moves
-- sending -> sent | failed. A `sent` row is never sent again.
CREATE TABLE emails (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    idempotency_key TEXT NOT NULL UNIQUE,
    message_id      TEXT NOT NULL,
    sender          TEXT NOT NULL,
    recipient       TEXT NOT NULL,
    subject         TEXT NOT NULL,
    body            TEXT NOT NULL,
    user_id         TEXT NOT NULL,
    tenant_id       TEXT,
    session_id      TEXT,
    status          TEXT NOT NULL CHECK (status IN ('sending', 'sent', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    error           TEXT,
    claimed_at      REAL NOT NULL,
    created_at      TEXT NOT NULL,
    sent_at         TEXT
);
"""

TABLES = (
    "meta",
    "customers",
    "orders",
    "order_items",
    "shipments",
    "tracking_events",
    "tickets",
    "refunds",
    "returns",
    "contact_changes",
    "password_resets",
    "emails",
)
