"""A decision taken through another process reaches the turn waiting on this one.

Two brokers over one database stand for two Hermes processes sharing PostgreSQL (or one SQLite
file): the turn waits on A, the operator's decision arrives through B.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from app.principal import Principal
from app.storage.approvals import ApprovalStore
from app.storage.session_writer import SessionWriter
from app.storage.sessions import SessionStore
from app.tools.approvals import ApprovalBroker
from app.tools.context import TurnScope
from tests.conftest import a_turn


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_a_decision_through_another_process_wakes_the_waiting_turn(open_db: Any) -> None:
    db = await open_db()
    session = await SessionStore(db).create("acme", "u1", {})
    here = ApprovalBroker(ApprovalStore(db), timeout_s=30, recheck_s=0.05)
    there = ApprovalBroker(ApprovalStore(db), timeout_s=30, recheck_s=0.05)
    scope = TurnScope(
        "acme",
        "u1",
        session.id,
        await a_turn(db, "acme", session.id),
        writer=SessionWriter(session.id),
    )
    created: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def on_created(approval: Any) -> None:
        created.set_result(approval.id)

    waiting = asyncio.create_task(
        here.request(
            scope,
            call_id="call_1",
            tool="refund",
            arguments={"amount": 5},
            reason="over the limit",
            on_created=on_created,
        )
    )
    approval_id = await created
    operator = Principal(tenant_id="acme", role="operator", subject="op-7")
    await there.decide(operator, session.id, approval_id, "approve", "checked")
    outcome = await asyncio.wait_for(waiting, 10)
    assert outcome.decision == "approved"
    assert outcome.approval.decided_by == "op-7"


async def test_without_a_decision_it_still_expires(open_db: Any) -> None:
    db = await open_db()
    session = await SessionStore(db).create("acme", "u1", {})
    broker = ApprovalBroker(ApprovalStore(db), timeout_s=0.3, recheck_s=0.05)
    outcome = await broker.request(
        TurnScope(
            "acme",
            "u1",
            session.id,
            await a_turn(db, "acme", session.id),
            writer=SessionWriter(session.id),
        ),
        call_id="call_1",
        tool="refund",
        arguments={},
        reason="over the limit",
    )
    assert outcome.decision == "expired"
