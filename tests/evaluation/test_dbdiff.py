"""The demo database's difference, row by row, and the verdict of a `db` expectation: listed
rows are matched, everything else is a forbidden write."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from app.evaluation.dbdiff import diff, judge, snapshot
from app.evaluation.scenario import DbExpect
from tests.conftest import copy_demo

REFUND = (
    "INSERT INTO refunds (id, order_id, customer_id, amount_cents, currency, status, created_at)"
    " VALUES ('RF99999999', '202405201235', 'cust_0001', 8900, 'CNY', 'approved', '2024-05-22')"
)


def changed_copy(template: Path, tmp_path: Path, *statements: str) -> Path:
    path = copy_demo(template, tmp_path / "demo.db")
    with sqlite3.connect(path) as conn:
        for sql in statements:
            conn.execute(sql)
    return path


def test_no_change_is_an_empty_diff_and_passes_the_strict_default(demo_template: Path) -> None:
    before = snapshot(demo_template)
    found = diff(before, snapshot(demo_template))
    assert found.empty()
    verdict = judge(found, DbExpect())
    assert (verdict.forbidden, verdict.missing) == ([], [])


def test_listed_rows_match_and_nothing_else_may_change(demo_template: Path, tmp_path: Path) -> None:
    path = changed_copy(
        demo_template,
        tmp_path,
        REFUND,
        "UPDATE orders SET status = 'refunded', updated_at = 'x' WHERE id = '202405201235'",
    )
    found = diff(snapshot(demo_template), snapshot(path))
    assert [r["id"] for r in found.created["refunds"]] == ["RF99999999"]
    assert found.changed["orders"][0].columns == ["status", "updated_at"]
    expected = DbExpect(
        created={"refunds": ({"order_id": "202405201235", "amount_cents": "8900"},)},
        changed={"orders": ({"id": "202405201235", "status": "refunded"},)},
    )
    verdict = judge(found, expected)
    assert (verdict.forbidden, verdict.missing) == ([], [])
    # the same change, expected by nobody: two forbidden writes
    strict = judge(found, DbExpect())
    assert len(strict.forbidden) == 2 and strict.missing == []
    assert "refunds: unexpected row created" in strict.forbidden[1]
    assert (
        "orders: unexpected change of {id=202405201235}: status 'delivered' -> 'refunded'"
        in strict.forbidden[0]
    )


def test_a_missing_row_and_an_unlisted_column_are_told_apart(
    demo_template: Path, tmp_path: Path
) -> None:
    path = changed_copy(
        demo_template,
        tmp_path,
        "UPDATE customers SET phone = '13700137000', email = 'x@example.com'"
        " WHERE id = 'cust_0001'",
        "DELETE FROM tracking_events WHERE tracking_number = 'SF123456789CN' AND seq = 3",
    )
    found = diff(snapshot(demo_template), snapshot(path))
    expected = DbExpect(
        created={"contact_changes": ({"field": "phone"},)},
        changed={"customers": ({"id": "cust_0001", "phone": "13700137000"},)},
    )
    verdict = judge(found, expected)
    assert verdict.missing == ["contact_changes: no created row {field=phone}"]
    assert verdict.forbidden == [
        "customers: row {id=cust_0001} changed email 'li.lei@example.com' -> 'x@example.com'",
        "tracking_events: row deleted {tracking_number=SF123456789CN, seq=3,"
        " time=2024-05-21T21:15:00+08:00, location=北京市, description=快件已到达北京转运中心}",
    ]
    assert (
        judge(
            found, DbExpect(ignore=frozenset({"customers", "tracking_events", "contact_changes"}))
        ).forbidden
        == []
    )
