"""Recall: the user's memory as quoted notes, its events, and the taint of customer-written
notes; a failing memory never fails the turn."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from app.conversation.loop import Resume
from app.conversation.turn.recall import Recall
from app.memory.port import BeforeTurn
from app.memory.port import Recall as Recalled
from app.memory.records import MemoryItem, Scope
from app.memory.scoring import Scored
from app.memory.testing import NullMemory
from app.storage.session_writer import SessionWriter
from tests.conversation.core import TENANT, open_core, types
from tests.conversation.doubles import RecordingMemory
from tests.conversation.turn.states import opened

NOW = 1_800_000_000.0


def note(item_id: str, value: str) -> Scored:
    item = MemoryItem(
        id=item_id, pk=1, tenant_id=TENANT, user_id="u1", tier="node", key="note:1",
        value=value, entity=None, fact_type="note", confidence=0.9, status="active",
        source="user", source_session_id=None, valid_until=None, created_at=NOW,
        updated_at=NOW, last_confirmed_at=NOW, origin="customer_text",
    )  # fmt: skip
    return Scored(item, 0.7, 0.5, 0.5, 0.5, 0.9)


@dataclass
class Forgetting(NullMemory):
    """A memory that answers every turn with "forgotten" (a forget command)."""

    forgotten: list[str] = field(default_factory=lambda: ["mem_1", "mem_2"])

    async def before_turn(
        self, scope: Scope, writer: SessionWriter, text: str, intent: str | None = None
    ) -> BeforeTurn:
        return BeforeTurn(forgotten=self.forgotten, forget_command=True)


class Broken(NullMemory):
    async def before_turn(
        self, scope: Scope, writer: SessionWriter, text: str, intent: str | None = None
    ) -> BeforeTurn:
        raise RuntimeError("memory store unavailable")


async def test_recalled_notes_join_the_context_with_their_taint(tmp_path: Path) -> None:
    memory = RecordingMemory([Recalled([note("mem_7", "prefers SF Express")], reason="topic")])
    async with open_core(tmp_path) as core:
        session_id = await core.new_session()
        state = await opened(core, session_id, "send it the usual way")

        await Recall(memory).run(state)

        [(call, asked)] = memory.calls
        assert call == "before_turn"
        assert asked == {
            "scope": Scope(TENANT, "u1"),
            "writer": state.writer,  # the turn's: its session, its lane, its lease
            "text": "send it the usual way",
            "intent": None,
        }
        [quoted] = state.notes
        assert quoted["role"] == "user" and "prefers SF Express" in str(quoted["content"])
        assert state.untrusted == ["memory note mem_7 in the customer's words"]
        assert types(await core.log(session_id), turn_id=state.turn.id)[-1] == "memory.recalled"


async def test_a_forget_command_is_announced_and_confirmed_by_the_model(tmp_path: Path) -> None:
    async with open_core(tmp_path) as core:
        session_id = await core.new_session()
        state = await opened(core, session_id, "forget that")

        await Recall(Forgetting()).run(state)

        [told] = state.notes
        assert told["role"] == "system" and "2 stored item(s) were deleted" in str(told["content"])
        [event] = [e for e in await core.log(session_id) if e.type == "memory.forgotten"]
        assert event.data["count"] == 2


async def test_a_failing_memory_adds_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with open_core(tmp_path) as core:
        session_id = await core.new_session()
        state = await opened(core, session_id, "hello")

        await Recall(Broken()).run(state)

        assert (state.notes, state.untrusted) == ([], [])
        assert "memory recall failed" in caplog.text


async def test_a_resumed_turn_recalls_nothing(tmp_path: Path) -> None:
    memory = RecordingMemory()
    async with open_core(tmp_path) as core:
        session_id = await core.new_session()
        state = await opened(core, session_id, "hello")
        state.resume = Resume(pending_calls=[], rounds_used=0)

        await Recall(memory).run(state)

        assert memory.calls == []
