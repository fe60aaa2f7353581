"""Where a resumed turn finds the real arguments its masked tool calls stand for, on both
engines: an approval's, a confirmed call's, a started write's until it succeeds."""

from __future__ import annotations

from typing import Any

from app.storage.approvals import ApprovalStore
from app.storage.confirmations import ConfirmationStore, confirmed_call_id
from app.storage.messages import MessageStore
from app.storage.session_writer import SessionWriter
from app.storage.sessions import SessionStore
from app.storage.tool_calls import ToolCallStore
from tests.storage.test_tx import add_turn

PHONE = {"phone": "13912345678"}


async def test_real_arguments_of_a_turn(open_db: Any) -> None:
    db = await open_db("m.db")
    session = await SessionStore(db).create("acme", "u1", {})
    where = {"tenant_id": "acme", "session_id": session.id}
    writer = SessionWriter(session.id)
    for number, turn_id in enumerate(("turn_0", "turn_1")):
        await add_turn(db, session.id, turn_id, number)
    await ApprovalStore(db).create(
        writer,
        **where,
        turn_id="turn_1",
        call_id="c_approved",
        tool="send_email",
        arguments={"phone": "139****5678"},
        arguments_full={"to": "a@example.com", **PHONE},
        reason="external",
        timeout_s=60,
    )
    confirmations = ConfirmationStore(db)
    asked = await confirmations.create(
        writer,
        **where,
        turn_id="turn_0",
        call_id="c_asked",
        tool="reset_password",
        arguments=PHONE,
        readback={"en": "send a link to 139****5678"},
        timeout_s=60,
    )
    await confirmations.resolve(writer, asked.id, "confirmed", "turn_1")
    calls = ToolCallStore(db)
    for key, call_id in (("k_running", "c_running"), ("k_done", "c_done")):
        await calls.begin(
            writer, key=key, **where, turn_id="turn_1", call_id=call_id, tool="t", arguments=PHONE
        )
    await calls.succeed(writer, "k_done", {"status": "success"})

    held = await MessageStore(db).real_arguments("turn_1")
    assert held == {
        "c_approved": {"to": "a@example.com", **PHONE},
        confirmed_call_id(asked.id): PHONE,
        "c_running": PHONE,  # c_done let go of its arguments when it succeeded
    }
    assert await MessageStore(db).real_arguments("turn_0") == {}
