"""The demo dataset: deterministic per seed, always holding the contract fixtures."""

from __future__ import annotations

import re
import sqlite3
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from app.demo.fixtures import (
    DELIVERED_ORDER,
    FOREIGN_ORDER,
    HAN_MEIMEI,
    LI_LEI,
    SHIPPED_ORDER,
    SHIPPED_TRACKING,
)
from app.demo.generator import REFERENCE, DemoDataError, ensure, regenerate
from tests.demo.conftest import dump, query


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("demo") / "demo.db"
    regenerate(path)
    return path


def test_same_seed_same_data_other_seed_other_data(tmp_path: Path, demo: Path) -> None:
    again, other = tmp_path / "again.db", tmp_path / "other.db"
    regenerate(again)
    regenerate(other, seed=7)
    assert dump(again) == dump(demo)
    assert dump(other)["customers"] != dump(demo)["customers"]
    fixture_rows = "SELECT * FROM orders WHERE id IN (?, ?, ?) ORDER BY id"
    ids = (SHIPPED_ORDER, DELIVERED_ORDER, FOREIGN_ORDER)
    assert query(other, fixture_rows, *ids) == query(demo, fixture_rows, *ids)


def test_contract_fixtures(demo: Path) -> None:
    assert query(demo, "SELECT name, phone, email FROM customers WHERE id = ?", LI_LEI) == [
        ("李雷", "13800138000", "li.lei@example.com")
    ]
    assert query(demo, "SELECT phone, email FROM customers WHERE id = ?", HAN_MEIMEI) == [
        ("13900139000", "han.meimei@example.com")
    ]
    orders = "SELECT customer_id, status, total_cents, currency FROM orders WHERE id = ?"
    assert query(demo, orders, SHIPPED_ORDER)[0][:2] == (LI_LEI, "shipped")
    assert query(demo, orders, DELIVERED_ORDER) == [(LI_LEI, "delivered", 8900, "CNY")]
    assert query(demo, orders, FOREIGN_ORDER)[0][:2] == (HAN_MEIMEI, "paid")
    assert query(
        demo, "SELECT tracking_number, carrier, status FROM shipments WHERE order_id = ?",
        SHIPPED_ORDER,
    ) == [(SHIPPED_TRACKING, "SF Express", "in_transit")]  # fmt: skip


def test_a_few_hundred_realistic_customers_and_orders(demo: Path) -> None:
    customers = query(demo, "SELECT name, language, phone, email FROM customers")
    assert len(customers) >= 300
    assert len(query(demo, "SELECT id FROM orders")) >= 500
    languages = Counter(c[1] for c in customers)
    assert languages["zh"] > languages["en"] > 30
    assert any(re.fullmatch(r"[\u4e00-\u9fff]{2,4}", c[0]) for c in customers)
    assert any(re.fullmatch(r"[A-Z][a-z]+ [A-Z][a-z]+", c[0]) for c in customers)
    assert all(re.fullmatch(r"1\d{10}", c[2]) for c in customers)
    assert all(re.search(r"@example\.(com|net|org)$", c[3]) for c in customers)
    carriers = {r[0] for r in query(demo, "SELECT DISTINCT carrier FROM shipments")}
    assert carriers == {"SF Express", "JD Logistics", "YTO Express", "ZTO Express", "EMS"}
    statuses = {r[0] for r in query(demo, "SELECT DISTINCT status FROM orders")}
    assert statuses == {"pending", "paid", "shipped", "delivered", "cancelled", "refunded"}
    ship_states = {r[0] for r in query(demo, "SELECT DISTINCT status FROM shipments")}
    assert ship_states == {"created", "in_transit", "out_for_delivery", "delivered", "exception"}
    for table in ("tickets", "refunds", "returns", "contact_changes"):
        assert query(demo, f"SELECT COUNT(*) FROM {table}")[0][0] > 10, table


def test_records_are_consistent(demo: Path) -> None:
    tracking = re.compile(r"^[A-Z]{2}\d{9,12}[A-Z]{0,2}$")
    assert all(tracking.match(r[0]) for r in query(demo, "SELECT tracking_number FROM shipments"))
    assert all(re.fullmatch(r"\d{12}", r[0]) for r in query(demo, "SELECT id FROM orders"))
    mismatched = query(
        demo,
        "SELECT o.id FROM orders o WHERE o.total_cents !="
        " (SELECT SUM(quantity * unit_price_cents) FROM order_items i WHERE i.order_id = o.id)",
    )
    assert mismatched == []
    unshipped = query(
        demo,
        "SELECT o.id FROM orders o JOIN shipments s ON s.order_id = o.id"
        " WHERE o.status IN ('pending', 'paid', 'cancelled')",
    )
    assert unshipped == []
    missing = query(
        demo,
        "SELECT o.id FROM orders o LEFT JOIN shipments s ON s.order_id = o.id"
        " WHERE o.status IN ('shipped', 'delivered') AND s.order_id IS NULL",
    )
    assert missing == []
    events = query(demo, "SELECT tracking_number, seq, time FROM tracking_events ORDER BY 1, 2")
    by_parcel: dict[str, list[datetime]] = {}
    for number, _seq, time in events:
        by_parcel.setdefault(number, []).append(datetime.fromisoformat(time))
    for times in by_parcel.values():
        assert times == sorted(times)
        assert times[-1] <= REFERENCE
    overrefunded = query(
        demo,
        "SELECT o.id FROM orders o JOIN refunds r ON r.order_id = o.id"
        " GROUP BY o.id HAVING SUM(r.amount_cents) > MAX(o.total_cents)",
    )
    assert overrefunded == []


def test_the_file_is_in_wal_mode(demo: Path) -> None:
    assert query(demo, "PRAGMA journal_mode") == [("wal",)]


def test_ensure_creates_a_missing_file_and_keeps_an_existing_one(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "demo.db"
    assert ensure(path) is True
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE customers SET name = '李雷雷' WHERE id = ?", (LI_LEI,))
    conn.close()
    assert ensure(path) is False
    assert query(path, "SELECT name FROM customers WHERE id = ?", LI_LEI) == [("李雷雷",)]
    regenerate(path)
    assert query(path, "SELECT name FROM customers WHERE id = ?", LI_LEI) == [("李雷",)]


def test_ensure_refuses_a_file_of_another_version(tmp_path: Path) -> None:
    path = tmp_path / "demo.db"
    regenerate(path)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    conn.close()
    with pytest.raises(DemoDataError, match="hermes demo-data --path"):
        ensure(path)
    junk = tmp_path / "junk.db"
    junk.write_text("not a database")
    with pytest.raises(DemoDataError):
        ensure(junk)
