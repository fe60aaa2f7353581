"""The watchdog's follow-up to an unanswered question, on a real database (SQLite and
PostgreSQL): written on the session's write lane, and only while the question is still the
session's last word; a message from the customer (a newer turn, here or in another process)
comes first."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from app.storage.messages import MessageStore
from app.storage.port import Database
from app.storage.records import Message, Turn
from app.storage.session_writer import SessionWriter
from app.storage.sessions import SessionStore, find_session
from app.storage.steps import NewStep, StepStore, TurnRef
from app.storage.turns import TurnStore
from app.storage.tx import Tx
from app.workflow.watchdog import Watchdog
from tests.storage.batches import another_lane, done_or_waiting_for_a_lock

TENANT = "t"
QUESTION = "Which order do you mean?"


class NoTurns:
    """This process runs no turn (the watchdog's `TurnControl`)."""

    def wake(self, session_id: str) -> None:
        return None

    async def abort(self, turn_id: str, code: str, message: str) -> bool:
        return False

    def running_turns(self) -> list[str]:
        return []


async def accept(turns: TurnStore, session_id: str, content: str) -> None:
    accepted = await turns.accept(
        SessionWriter(session_id),
        tenant_id=TENANT,
        session_id=session_id,
        content=content,
        token_estimate=3,
        client_message_id=None,
        policy="enqueue",
        max_queued=5,
    )
    assert accepted is not None


@dataclass
class Asked:
    """A session whose first turn ended with a question nobody answered in time."""

    db: Database
    turns: TurnStore
    messages: MessageStore
    watchdog: Watchdog
    turn: Turn

    @property
    def session_id(self) -> str:
        return self.turn.session_id

    async def customer_writes(self) -> None:
        await accept(self.turns, self.session_id, "the blue lamp")

    async def follow_ups(self) -> list[Message]:
        stored = (await self.messages.page(TENANT, self.session_id))[0]
        return [m for m in stored if m.metadata.get("kind") == "ask_user_timeout"]


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def asked(open_db: Any) -> AsyncIterator[Asked]:
    db: Database = await open_db()
    session = await SessionStore(db).create(TENANT, "u", {})
    turns, steps = TurnStore(db), StepStore(db)
    await accept(turns, session.id, "where is my order?")
    claimed = await turns.claim_next(SessionWriter(session.id), session.id)
    assert claimed is not None
    turn = claimed.turn
    await turns.complete(
        SessionWriter(turn.session_id),
        turn,
        text=QUESTION,
        token_estimate=5,
        model=None,
        rounds=1,
        prompt_tokens=0,
        completion_tokens=0,
    )
    ask = NewStep(
        key="ask_user",
        action_type="ask_user",
        name="ask_user",
        input_context={"question": QUESTION},
        status="running",
        deadline_at=time.time() - 1,
    )
    await steps.enqueue(
        SessionWriter(TurnRef(TENANT, session.id, turn.id).session_id),
        TurnRef(TENANT, session.id, turn.id),
        [ask],
        50,
    )
    watchdog = Watchdog(
        steps=steps, turns=turns, manager=NoTurns(), stuck_after_s=300, interval_s=3600
    )
    yield Asked(db, turns, MessageStore(db), watchdog, turn)


def lanes_of_writes(db: Database) -> list[str | None]:
    """The session named by every write submitted to `db` from now on, in order (None: no
    session's)."""
    keys: list[str | None] = []
    submit = db.submit

    def recording(
        writer: SessionWriter | None, fn: Callable[[Any], Any], on_commit: Any = None
    ) -> Any:
        keys.append(None if writer is None else writer.session_id)
        return submit(writer, fn, on_commit)

    db.submit = recording  # type: ignore[method-assign]
    return keys


async def test_an_unanswered_question_gets_its_follow_up_on_the_sessions_lane(
    asked: Asked,
) -> None:
    lanes = lanes_of_writes(asked.db)

    _, expired = await asked.watchdog.check()

    assert [s.status for s in expired] == ["timed_out"]
    [follow_up] = await asked.follow_ups()
    assert (follow_up.turn_id, follow_up.role) == (asked.turn.id, "assistant")
    # Its write kept its place among the session's own (the expiry sweep is no session's).
    assert lanes[-1] == asked.session_id


async def test_no_follow_up_once_the_customer_wrote_again(asked: Asked) -> None:
    """The customer's message arrived before the watchdog's sweep (its turn queued, not yet
    claimed, so nothing answered the question): the follow-up would come after it."""
    await asked.customer_writes()

    _, expired = await asked.watchdog.check()

    assert [s.status for s in expired] == ["timed_out"]
    assert await asked.follow_ups() == []


async def test_no_follow_up_when_another_process_accepts_a_message_meanwhile(
    asked: Asked, backend: str
) -> None:
    """Another process is accepting the customer's message (its transaction has locked the
    session and added the turn, not committed yet) when the follow-up is written: the follow-up
    waits for it and then sees the newer turn."""
    if backend != "postgres":
        pytest.skip("SQLite admits one writer at a time: nothing can be meanwhile")
    inserted, go = threading.Event(), threading.Event()
    session_id, number = asked.session_id, asked.turn.number + 1

    def accepting(tx: Tx) -> None:
        assert find_session(tx, TENANT, session_id) is not None
        tx.execute(
            "INSERT INTO turns (id, session_id, tenant_id, number, user_message_id, status,"
            " accepted_seq, created_at)"
            " VALUES ('turn_other', ?, ?, ?, 'msg_other', 'queued', 0, ?)",
            (session_id, TENANT, number, tx.now),
        )
        inserted.set()
        go.wait(10)

    held = asyncio.ensure_future(
        asked.turns.transact(another_lane(asked.db, session_id), accepting)
    )
    try:
        assert await asyncio.to_thread(inserted.wait, 10)
        checking = asyncio.ensure_future(asked.watchdog.check())
        await done_or_waiting_for_a_lock(asked.db, checking)
    finally:
        go.set()
    await held
    await checking
    assert await asked.follow_ups() == []
