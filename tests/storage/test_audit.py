"""The audit log: decisions and reads of unmasked arguments are recorded with who, which tenant
and when, in the same transaction as what they describe, and can be queried per tenant."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.storage.approvals import Approval, ApprovalStore
from app.storage.audit import AuditStore
from app.storage.port import Database
from app.storage.session_writer import SessionWriter
from app.storage.sessions import SessionStore
from tests.storage.test_tx import add_turn


@pytest.fixture
async def db(open_db: Any) -> AsyncIterator[Database]:
    database = await open_db("a.db")
    yield database
    await database.close()


async def _approval(db: Database, tenant: str = "acme") -> Approval:
    session = await SessionStore(db).create(tenant, "u1", {})
    turn_id = f"turn_{session.id}"
    await add_turn(db, session.id, turn_id)
    return await ApprovalStore(db).create(
        SessionWriter(session.id),
        tenant_id=tenant,
        session_id=session.id,
        turn_id=turn_id,
        call_id="c1",
        tool="send_email",
        arguments={"to": "l***@example.com"},
        arguments_full={"to": "lx.attacker@example.com"},
        sensitive=[{"field": "to", "kinds": ["email"], "note": "to contains an email address"}],
        reason="external",
        timeout_s=60,
    )


async def test_the_approval_keeps_both_copies_and_the_summary(db: Database) -> None:
    created = await _approval(db)
    stored = await ApprovalStore(db).get(created.id)
    assert stored is not None
    assert stored.arguments == {"to": "l***@example.com"}
    assert stored.arguments_full == {"to": "lx.attacker@example.com"}
    assert stored.sensitive[0]["kinds"] == ["email"]
    assert "lx.attacker" not in repr(stored)  # never in a log line by accident


async def test_a_decision_by_a_person_is_audited_with_it(db: Database) -> None:
    approval = await _approval(db)
    await ApprovalStore(db).decide(
        SessionWriter(approval.session_id),
        tenant_id="acme",
        session_id=approval.session_id,
        approval_id=approval.id,
        status="rejected",
        decided_by="key_op",
        reason="not our customer",
        role="operator",
    )
    [entry] = await AuditStore(db).list("acme", action="approval.decided")
    assert (entry.actor, entry.role, entry.target_id) == ("key_op", "operator", approval.id)
    assert entry.session_id == approval.session_id and entry.at > 0
    assert entry.details == {
        "tool": "send_email",
        "decision": "rejected",
        "reason": "not our customer",
    }


async def test_expiry_by_the_system_is_not_a_person_s_decision(db: Database) -> None:
    approval = await _approval(db)
    await ApprovalStore(db).decide(
        SessionWriter(approval.session_id),
        tenant_id="acme",
        session_id=approval.session_id,
        approval_id=approval.id,
        status="expired",
        decided_by="system",
        reason="no decision before it expired",
    )
    assert await AuditStore(db).list("acme") == []


async def test_reads_are_listed_per_tenant_and_filtered(db: Database) -> None:
    ours, theirs = await _approval(db, "acme"), await _approval(db, "other")
    store = ApprovalStore(db)
    await store.audit_full_read([ours], actor="key_op", role="operator")
    await store.audit_full_read([theirs], actor="key_x", role="admin")
    await AuditStore(db).record(tenant_id="acme", actor="key_op", role="operator", action="x.y")
    audit = AuditStore(db)
    assert [e.action for e in await audit.list("acme")] == ["approval.read_full", "x.y"]
    [read] = await audit.list("acme", action="approval.read_full", target_id=ours.id)
    assert read.details == {"tool": "send_email", "status": "pending"}
    assert await audit.list("acme", target_id=theirs.id) == []
    assert [e.actor for e in await audit.list("other", session_id=theirs.session_id)] == ["key_x"]


async def test_a_side_effecting_calls_outcome_is_audited_without_its_arguments(
    db: Database,
) -> None:
    from app.storage.tool_calls import ToolCallStore

    session = await SessionStore(db).create("acme", "u1", {})
    calls = ToolCallStore(db)
    for key, call_id, ok in (("k-ok", "call_1", True), ("k-bad", "call_2", False)):
        await calls.begin(
            SessionWriter(session.id),
            key=key,
            tenant_id="acme",
            session_id=session.id,
            turn_id="turn_1",
            call_id=call_id,
            tool="create_ticket",
            arguments={"summary": "secret words"},
        )
        if ok:
            await calls.succeed(
                SessionWriter(session.id),
                key,
                {"ticket_id": "TK00000001", "summary": "secret words"},
            )
        else:
            await calls.abandon(SessionWriter(session.id), key)
    trail = await AuditStore(db).list("acme", session_id=session.id)
    assert [(e.action, e.target_id, e.actor, e.role) for e in trail] == [
        ("tool.succeeded", "call_1", "model", "model"),
        ("tool.failed", "call_2", "model", "model"),
    ]
    assert trail[1].details == {
        "tool": "create_ticket", "turn_id": "turn_1", "idempotency_key": "k-bad",
    }  # fmt: skip
    assert "secret words" not in str(trail)
    assert await calls.stored_result("k-bad") is None  # the failed attempt is gone
    assert await AuditStore(db).list("other", session_id=session.id) == []
