"""TurnStore's transactions on a real SQLite file: accept (idempotency, busy policy, queue
limit), claim_next, complete, fail, the transitions a claim or an interruption composes
(app.conversation.claims, app.conversation.interruptions) and reopening; each state change is
committed together with the events that announce it, and published only after the commit."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from app.errors import QueueFull, SessionBusy
from app.storage import turns
from app.storage.event_log import EventStore
from app.storage.messages import MessageStore
from app.storage.port import Database
from app.storage.records import Event, Message
from app.storage.session_writer import NO_SESSION, SessionWriter
from app.storage.sessions import SessionStore
from app.storage.turns import Accepted, BusyPolicy, TurnStore
from app.storage.tx import Tx
from tests.storage.batches import beside_a_batchmate

TENANT = "default"


@dataclass
class Stores:
    db: Database
    sessions: SessionStore
    turns: TurnStore
    events: EventStore
    messages: MessageStore
    published: list[list[Event]] = field(default_factory=list)  # one list per commit

    async def session(self) -> str:
        session_id = (await self.sessions.create(TENANT, "u1", {})).id
        self.published.clear()
        return session_id

    async def accept(
        self,
        session_id: str,
        content: str = "hello",
        *,
        policy: BusyPolicy = "enqueue",
        max_queued: int = 10,
        client_message_id: str | None = None,
        tenant_id: str = TENANT,
    ) -> Accepted | None:
        return await self.turns.accept(
            SessionWriter(session_id),
            tenant_id=tenant_id,
            session_id=session_id,
            content=content,
            token_estimate=2,
            client_message_id=client_message_id,
            policy=policy,
            max_queued=max_queued,
        )

    async def log(self, session_id: str) -> list[tuple[str, str | None]]:
        """(type, turn id) of every stored event after the session's creation."""
        return [(e.type, e.turn_id) for e in await self.events.after(session_id, 1)]

    async def history(self, session_id: str) -> list[Message]:
        return (await self.messages.page(TENANT, session_id, limit=100))[0]


@pytest.fixture
async def stores(open_db: Any) -> AsyncIterator[Stores]:
    db = await open_db("turns.db")
    published: list[list[Event]] = []
    yield Stores(
        db,
        SessionStore(db, published.append),
        TurnStore(db, published.append),
        EventStore(db, published.append),
        MessageStore(db, published.append),
        published,
    )
    await db.close()


async def accepted(
    stores: Stores, session_id: str, content: str = "hello", **kw: object
) -> Accepted:
    result = await stores.accept(session_id, content, **kw)  # type: ignore[arg-type]
    assert result is not None
    return result


# -- accept ---------------------------------------------------------------------------------------


async def test_accept_records_the_message_and_a_queued_turn_without_an_event(
    stores: Stores,
) -> None:
    session_id = await stores.session()

    result = await accepted(stores, session_id, "where is my order?")

    turn = result.turn
    assert (result.created, result.ahead, result.resumed) == (True, 0, False)
    assert (turn.status, turn.number, turn.accepted_seq) == ("queued", 1, 1)
    [message] = await stores.history(session_id)
    assert (message.id, message.role, message.content) == (
        turn.user_message_id,
        "user",
        "where is my order?",
    )
    session = await stores.sessions.find(TENANT, session_id)
    assert session is not None and session.turn_count == 1
    assert await stores.log(session_id) == []  # an idle session's turn is announced when claimed
    assert stores.published == []


async def test_accept_in_an_unknown_or_foreign_session_is_none(stores: Stores) -> None:
    session_id = await stores.session()
    assert await stores.accept("ses_missing") is None
    assert await stores.accept(session_id, tenant_id="other") is None
    assert await stores.history(session_id) == []


async def test_a_repeated_client_message_id_returns_the_first_turn(stores: Stores) -> None:
    session_id = await stores.session()
    first = await accepted(stores, session_id, "refund please", client_message_id="m-1")

    # Even while that turn is open and the policy would refuse a new one.
    again = await accepted(
        stores, session_id, "refund please", client_message_id="m-1", policy="reject"
    )

    assert (again.created, again.turn.id) == (False, first.turn.id)
    assert len(await stores.history(session_id)) == 1
    assert (await stores.history(session_id))[0].metadata == {"client_message_id": "m-1"}


async def test_reject_policy_refuses_while_a_turn_is_open_and_writes_nothing(
    stores: Stores,
) -> None:
    session_id = await stores.session()
    await accepted(stores, session_id, "one")

    with pytest.raises(SessionBusy) as raised:
        await stores.accept(session_id, "two", policy="reject")

    assert raised.value.code == "session_busy"
    assert [m.content for m in await stores.history(session_id)] == ["one"]
    session = await stores.sessions.find(TENANT, session_id)
    assert session is not None and session.turn_count == 1
    assert await stores.log(session_id) == []


async def test_a_refused_message_leaves_the_other_jobs_of_its_batch_run_once(
    stores: Stores,
) -> None:
    """A refusal is the accept job's answer, not a failure: the batch it shares commits as it
    is. (Raised, it made the writer run the whole batch again, each job in a savepoint: every
    other job of the batch ran twice.)"""
    session_id = await stores.session()
    await accepted(stores, session_id, "one")
    before = stores.db.counts()
    runs, (refused, full) = await beside_a_batchmate(
        stores.turns,
        SessionWriter(session_id),
        stores.accept(session_id, "two", policy="reject"),
        stores.accept(session_id, "three", max_queued=0),
    )
    with pytest.raises(SessionBusy):
        await refused
    with pytest.raises(QueueFull):
        await full

    assert runs == 1
    spent = stores.db.counts() - before
    assert spent.commits == 2  # the gate's batch, then this one, with no savepoints in it:
    assert spent.control == 4  # BEGIN and COMMIT twice
    assert [m.content for m in await stores.history(session_id)] == ["one"]


async def test_enqueue_policy_queues_behind_open_turns_and_announces_it(stores: Stores) -> None:
    session_id = await stores.session()
    first = await accepted(stores, session_id, "one")
    second = await accepted(stores, session_id, "two")
    third = await accepted(stores, session_id, "three")

    assert [t.ahead for t in (first, second, third)] == [0, 1, 2]
    assert [t.turn.number for t in (first, second, third)] == [1, 2, 3]
    events = await stores.events.after(session_id, 1)
    assert [(e.type, e.turn_id, e.data["ahead"]) for e in events] == [
        ("turn.queued", second.turn.id, 1),
        ("turn.queued", third.turn.id, 2),
    ]
    # Each turn's stream starts after what was logged before it was accepted.
    assert (second.turn.accepted_seq, third.turn.accepted_seq) == (1, 2)


async def test_the_queue_limit_counts_waiting_turns(stores: Stores) -> None:
    session_id = await stores.session()
    await accepted(stores, session_id, "one")
    await stores.turns.claim_next(SessionWriter(session_id), session_id)  # running
    await accepted(stores, session_id, "two", max_queued=1)  # one waiting: allowed

    with pytest.raises(QueueFull):
        await stores.accept(session_id, "three", max_queued=1)

    assert [m.content for m in await stores.history(session_id)] == ["one", "two"]


async def test_a_message_to_an_archived_session_resumes_it(stores: Stores) -> None:
    session_id = await stores.session()
    assert await stores.sessions.archive_idle(time.time() + 60) == [session_id]

    result = await accepted(stores, session_id)

    assert result.resumed
    session = await stores.sessions.find(TENANT, session_id)
    assert session is not None and (session.status, session.archived_at) == ("active", None)
    assert await stores.log(session_id) == [("session.archived", None), ("session.resumed", None)]


# -- claim_next -----------------------------------------------------------------------------------


async def test_claim_next_runs_the_oldest_queued_turn_and_announces_it(stores: Stores) -> None:
    session_id = await stores.session()
    first = await accepted(stores, session_id, "one")
    await accepted(stores, session_id, "two")
    stores.published.clear()

    claimed = await stores.turns.claim_next(SessionWriter(session_id), session_id)

    assert claimed is not None
    assert (claimed.turn.id, claimed.turn.status, claimed.user_id) == (
        first.turn.id,
        "running",
        "u1",
    )
    assert claimed.more  # the second is queued behind it
    assert claimed.turn.started_at is not None
    [[started]] = stores.published
    assert (started.type, started.turn_id, started.data) == (
        "turn.started",
        first.turn.id,
        {"turn_id": first.turn.id, "user_message_id": first.turn.user_message_id},
    )


async def test_claim_next_waits_while_a_turn_runs_and_is_none_when_idle(stores: Stores) -> None:
    session_id = await stores.session()
    assert await stores.turns.claim_next(SessionWriter(session_id), session_id) is None
    await accepted(stores, session_id, "one")
    only = await stores.turns.claim_next(SessionWriter(session_id), session_id)
    assert only is not None and not only.more
    await accepted(stores, session_id, "two")

    assert (
        await stores.turns.claim_next(SessionWriter(session_id), session_id) is None
    )  # one at a time

    await stores.turns.fail(SessionWriter(only.turn.session_id), only.turn, "x", "done")
    after = await stores.turns.claim_next(SessionWriter(session_id), session_id)
    assert after is not None and after.turn.number == 2


# -- complete -------------------------------------------------------------------------------------


async def test_complete_stores_the_reply_closes_the_turn_and_announces_both_at_once(
    stores: Stores,
) -> None:
    session_id = await stores.session()
    await accepted(stores, session_id)
    claimed = await stores.turns.claim_next(SessionWriter(session_id), session_id)
    assert claimed is not None
    stores.published.clear()
    seen_in_tx: list[str] = []

    message = await stores.turns.complete(
        SessionWriter(claimed.turn.session_id),
        claimed.turn,
        text="All done.",
        token_estimate=3,
        model="m1",
        rounds=2,
        prompt_tokens=30,
        completion_tokens=9,
        metadata={"stopped": "final"},
        snapshot=lambda tx: seen_in_tx.append(
            tx.one("SELECT status FROM turns WHERE id = ?", (claimed.turn.id,))[0]  # type: ignore[index]
        ),
    )

    assert seen_in_tx == ["completed"]  # the snapshot is written inside the same transaction
    turn = await stores.turns.get(session_id, claimed.turn.id)
    assert turn is not None
    assert (turn.status, turn.assistant_message_id, turn.model, turn.rounds) == (
        "completed",
        message.id,
        "m1",
        2,
    )
    assert (turn.prompt_tokens, turn.completion_tokens) == (30, 9)
    assert turn.finished_at is not None
    assert [(m.role, m.content) for m in await stores.history(session_id)] == [
        ("user", "hello"),
        ("assistant", "All done."),
    ]
    assert message.metadata == {"stopped": "final"}
    [batch] = stores.published  # one commit
    assert [e.type for e in batch] == ["message.completed", "turn.completed"]
    assert batch[1].seq == batch[0].seq + 1
    assert batch[0].data["text"] == "All done."
    assert batch[1].data["usage"] == {"prompt_tokens": 30, "completion_tokens": 9}


async def test_a_failing_snapshot_write_leaves_the_turn_running_and_nothing_announced(
    stores: Stores,
) -> None:
    session_id = await stores.session()
    await accepted(stores, session_id)
    claimed = await stores.turns.claim_next(SessionWriter(session_id), session_id)
    assert claimed is not None
    stores.published.clear()

    def broken(tx: Tx) -> None:
        raise RuntimeError("snapshot failed")

    with pytest.raises(RuntimeError):
        await stores.turns.complete(
            SessionWriter(claimed.turn.session_id),
            claimed.turn,
            text="lost",
            token_estimate=1,
            model=None,
            rounds=0,
            prompt_tokens=0,
            completion_tokens=0,
            snapshot=broken,
        )

    turn = await stores.turns.get(session_id, claimed.turn.id)
    assert turn is not None and turn.status == "running"
    assert [m.role for m in await stores.history(session_id)] == ["user"]
    assert stores.published == []
    assert await stores.log(session_id) == [("turn.started", claimed.turn.id)]


# -- fail, recovery, reopening --------------------------------------------------------------------


async def test_fail_closes_an_open_turn_once(stores: Stores) -> None:
    session_id = await stores.session()
    queued = (await accepted(stores, session_id)).turn

    await stores.turns.fail(
        SessionWriter(queued.session_id), queued, "llm_unavailable", "the model is down"
    )
    await stores.turns.fail(
        SessionWriter(queued.session_id), queued, "other", "a second failure changes nothing"
    )

    turn = await stores.turns.get(session_id, queued.id)
    assert turn is not None
    assert (turn.status, turn.error_code, turn.error_message) == (
        "failed",
        "llm_unavailable",
        "the model is down",
    )
    events = await stores.events.after(session_id, 1)
    assert [(e.type, e.data["code"]) for e in events] == [("turn.failed", "llm_unavailable")]


async def test_fail_queued_ends_only_the_queued_turns_each_announced(stores: Stores) -> None:
    session_id = await stores.session()
    await accepted(stores, session_id, "one")
    running = await stores.turns.claim_next(SessionWriter(session_id), session_id)
    assert running is not None
    second = (await accepted(stores, session_id, "two")).turn
    third = (await accepted(stores, session_id, "three")).turn
    stores.published.clear()

    failed = await stores.turns.transact(
        NO_SESSION, lambda tx: turns.fail_queued(tx, session_id, "handed_off", "an agent answers")
    )

    assert sorted(t.id for t in failed) == sorted([second.id, third.id])
    for turn in (second, third):
        ended = await stores.turns.get(session_id, turn.id)
        assert ended is not None
        assert (ended.status, ended.error_code, ended.error_message) == (
            "failed",
            "handed_off",
            "an agent answers",
        )
    still = await stores.turns.get(session_id, running.turn.id)
    assert still is not None and still.status == "running"
    [batch] = stores.published
    assert sorted((e.type, e.turn_id) for e in batch) == sorted(
        [("turn.failed", second.id), ("turn.failed", third.id)]
    )


async def test_mark_interrupted_marks_only_a_running_turn_and_announces_nothing(
    stores: Stores,
) -> None:
    session_id = await stores.session()
    await accepted(stores, session_id, "one")
    running = await stores.turns.claim_next(SessionWriter(session_id), session_id)
    assert running is not None
    waiting = (await accepted(stores, session_id, "two")).turn
    stores.published.clear()

    def mark(tx: Tx) -> list[bool]:
        found = turns.running(tx, session_id)
        assert [t.id for t in found] == [running.turn.id]
        return [turns.mark_interrupted(tx, t, "gone") for t in (*found, waiting)]

    assert await stores.turns.transact(SessionWriter(session_id), mark) == [True, False]
    first = await stores.turns.get(session_id, running.turn.id)
    second = await stores.turns.get(session_id, waiting.id)
    assert first is not None and (first.status, first.error_code) == ("failed", "interrupted")
    assert second is not None and second.status == "queued"
    assert stores.published == []  # the caller closes what it left open, then announces it


async def test_a_failed_last_turn_reopens_to_resume_from_a_step(stores: Stores) -> None:
    session_id = await stores.session()
    await accepted(stores, session_id)
    claimed = await stores.turns.claim_next(SessionWriter(session_id), session_id)
    assert claimed is not None
    await stores.turns.fail(
        SessionWriter(claimed.turn.session_id), claimed.turn, "llm_unavailable", "down"
    )
    last_seq = await stores.events.last_seq(session_id)

    reopened = await stores.turns.reopen(
        SessionWriter(claimed.turn.session_id), claimed.turn, "step_1"
    )

    assert reopened is not None
    assert (reopened.status, reopened.resume_from_step, reopened.error_code) == (
        "queued",
        "step_1",
        None,
    )
    assert reopened.accepted_seq == last_seq  # its stream starts after the failure
    again = await stores.turns.claim_next(SessionWriter(session_id), session_id)
    assert again is not None and again.turn.id == claimed.turn.id
    started = (await stores.events.after(session_id, last_seq))[0]
    assert started.data["resumed_from_step"] == "step_1"


async def test_only_a_failed_turn_of_an_idle_session_reopens(stores: Stores) -> None:
    session_id = await stores.session()
    await accepted(stores, session_id, "one")
    claimed = await stores.turns.claim_next(SessionWriter(session_id), session_id)
    assert claimed is not None

    assert (
        await stores.turns.reopen(SessionWriter(claimed.turn.session_id), claimed.turn, "s") is None
    )  # still running

    await stores.turns.fail(SessionWriter(claimed.turn.session_id), claimed.turn, "x", "failed")
    await accepted(stores, session_id, "two")
    assert (
        await stores.turns.reopen(SessionWriter(claimed.turn.session_id), claimed.turn, "s") is None
    )  # the session is busy
    turn = await stores.turns.get(session_id, claimed.turn.id)
    assert turn is not None and turn.status == "failed"


async def test_record_understanding_marks_the_message_and_announces_it(stores: Stores) -> None:
    session_id = await stores.session()
    turn = (await accepted(stores, session_id)).turn

    ranking = [
        {"intent": "order_status", "confidence": 0.9},
        {"intent": "greet", "confidence": 0.1},
    ]
    nlu = {"intent": "order_status", "confidence": 0.9, "ranking": ranking}
    await stores.turns.record_understanding(SessionWriter(turn.session_id), turn, nlu)

    [message] = await stores.history(session_id)
    # the ranking is announced only: the message, kept longest, has no use for it
    assert message.metadata["nlu"] == {"intent": "order_status", "confidence": 0.9}
    [event] = await stores.events.after(session_id, 1)
    assert (event.type, event.data["intent"], event.data["message_id"]) == (
        "intent.classified",
        "order_status",
        turn.user_message_id,
    )
    assert event.data["ranking"] == ranking
