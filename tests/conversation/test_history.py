"""A session's history kept in memory between turns gives every model call exactly the context
a rebuild from the database gives, reads only what is new, and stays bounded.

The reference is the same service with the cache off (`context_cache_sessions=0`: every turn
reads its history from the database, as before the cache existed), driven through the same
script in lockstep; both sides' model requests must be identical, turn by turn.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from app import events
from app.conversation.history import Finished, SessionHistory, SessionView
from app.llm.testing import Fail, FakeLLMServer, Reply, Step, ToolCall, ToolCalls
from app.settings import PROJECT_ROOT
from app.storage.messages import MessageStore, count_added
from app.storage.postgres.database import PostgresDatabase
from app.storage.records import Message, Turn
from app.storage.session_writer import SessionWriter
from app.storage.sessions import SessionStore
from app.storage.snapshots import SnapshotStore
from app.storage.turns import TurnStore, complete_turn, turn_message
from app.storage.tx import Tx
from app.testing import LiveService, serve
from tests.conftest import FIXTURE_TOOLS, new_session
from tests.storage.batches import another_lane, done_or_waiting_for_a_lock
from tests.tools.fixture_tools import REC

Action = Callable[[LiveService, str], Awaitable[None]]
T = TypeVar("T")

# Long enough that a 1000-token budget folds old turns into the summary after a few turns.
FILLER = (
    "I moved house last spring and my parcels keep going to the old address; the courier "
    "says the label was printed from my profile, so please keep that in mind as we go on. "
)


def history_of(svc: LiveService) -> SessionHistory:
    return svc.runtime.manager.pipeline.history


async def post(svc: LiveService, session_id: str, content: str, status: int = 200) -> None:
    response = await svc.client.post(
        f"/v1/sessions/{session_id}/messages", json={"content": content}
    )
    assert response.status_code == status, response.text


def say(content: str, *script: Step, status: int = 200) -> tuple[list[Step], Action]:
    async def act(svc: LiveService, session_id: str) -> None:
        await post(svc, session_id, content, status)

    return list(script), act


def retry_failed_model_step(*script: Step) -> tuple[list[Step], Action]:
    async def act(svc: LiveService, session_id: str) -> None:
        steps = (await svc.client.get(f"/v1/sessions/{session_id}/steps")).json()["items"]
        failed = [s for s in steps if s["status"] == "failed" and s["key"].startswith("model:")]
        url = f"/v1/sessions/{session_id}/steps/{failed[-1]['id']}/retry"
        async with svc.client.stream(
            "POST", url, headers={"Accept": "text/event-stream"}
        ) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line == "event: turn.completed":
                    break

    return list(script), act


def question_times_out() -> tuple[list[Step], Action]:
    """The last reply asked a question; nobody answers, so the watchdog adds its follow-up to
    that (already finished) turn: a message the cache did not write itself."""

    async def act(svc: LiveService, session_id: str) -> None:
        deadline = time.monotonic() + 10
        while not (await svc.runtime.watchdog.check())[1]:
            assert time.monotonic() < deadline, "the ask_user step never timed out"
            await asyncio.sleep(0.02)

    return [], act


def archive_idle() -> tuple[list[Step], Action]:
    async def act(svc: LiveService, session_id: str) -> None:
        assert session_id in await svc.runtime.conversation.archive_idle(time.time() + 60)

    return [], act


SCRIPT: list[tuple[list[Step], Action]] = [
    say("hello, I need some help", Reply("Hello there, glad to help.")),
    say(
        "look up the value a for me",
        ToolCalls(ToolCall("slow_read", {"key": "a"}, id="r1")),
        Reply("a is value of a."),
    ),
    say("and the order from yesterday", Reply("Which order do you mean?")),
    question_times_out(),
    say(FILLER + "the one with the blue lamp", Reply("Found it: the blue lamp order.")),
    say(FILLER + "it never arrived", Reply("I am sorry to hear that it never arrived.")),
    say(
        FILLER + "read b as well",
        ToolCalls(ToolCall("slow_read", {"key": "b"}, id="r2")),
        Fail(500),
        Fail(500),  # llm_retries=1: the turn fails at its second model call
        status=502,
    ),
    retry_failed_model_step(Reply("b is value of b.")),
    say(FILLER + "thanks, what next", Reply("We can send a replacement.")),
    archive_idle(),
    say("I am back about the lamp", Reply("Welcome back; the replacement is on its way.")),
]
AFTER_RESTART: list[tuple[list[Step], Action]] = [
    say("one more thing about the address", Reply("Your address is updated.")),
    say(
        "read c too",
        ToolCalls(ToolCall("slow_read", {"key": "c"}, id="r3")),
        Reply("c is value of c."),
    ),
    say("that is all", Reply("Goodbye.")),
]


async def play(
    fake_llm: FakeLLMServer, svc: LiveService, session_id: str, step: tuple[list[Step], Action]
) -> list[list[dict[str, Any]]]:
    """Run one scripted action; the messages of every model request it caused."""
    script, act = step
    REC.reset()
    before = len(fake_llm.requests)
    fake_llm.enqueue(*script)
    await act(svc, session_id)
    assert fake_llm.pending() == 0
    return [r.messages for r in fake_llm.requests[before:]]


def settings_for(make_settings: Any, name: str, **extra: Any) -> Any:
    return make_settings(
        db_path=Path(make_settings().storage.db_path).with_name(f"{name}.db"),
        tools_file=FIXTURE_TOOLS,
        context_budget_tokens=1000,
        context_keep_turns=2,
        ask_user_timeout_s=0.05,
        watchdog_interval_s=3600,
        **extra,
    )


@pytest.mark.parametrize("window", [1000, 10], ids=["whole", "cut-mid-turn"])
async def test_the_cached_context_is_the_one_a_rebuild_gives(
    make_settings: Any, fake_llm: FakeLLMServer, window: int
) -> None:
    """Plain turns, tool rounds, a follow-up added by the watchdog, summaries folding in, a
    failed turn retried from its step, an archived session resuming, a restart; with a window
    of 10 messages the oldest turn in view is cut in the middle of a tool exchange."""
    cached = settings_for(make_settings, "cached", context_max_messages=window)
    rebuilt = settings_for(
        make_settings, "rebuilt", context_cache_sessions=0, context_max_messages=window
    )
    async with serve(rebuilt) as ref:
        ref_session = await new_session(ref)
        async with serve(cached) as svc:
            session_id = await new_session(svc)
            for step in SCRIPT:
                seen = await play(fake_llm, svc, session_id, step)
                assert seen == await play(fake_llm, ref, ref_session, step)
            history = history_of(svc)
            assert history.hits >= 5  # most turns read only what was new
            assert history_of(ref).hits == 0 and len(history_of(ref)) == 0
        # A new process has nothing in memory: it rebuilds from the database, then goes on.
        async with serve(cached) as svc:
            for step in AFTER_RESTART:
                seen = await play(fake_llm, svc, session_id, step)
                assert seen == await play(fake_llm, ref, ref_session, step)
            assert history_of(svc).rebuilds == 1 and history_of(svc).hits == 2
    summaries = [m for m in seen[0] if str(m.get("content")).startswith("Summary of the earlier")]
    if window == 1000:  # (ten messages never fill the token budget: nothing to fold)
        assert summaries, "the script is meant to fold old turns into the summary"
    else:
        assert len(seen[0]) <= 10 + 4  # system prompt, goal, NLU note, the cut window


async def test_evicted_sessions_rebuild_and_memory_stays_bounded(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    cached = settings_for(make_settings, "small", context_cache_sessions=2)
    async with (
        serve(settings_for(make_settings, "rebuilt", context_cache_sessions=0)) as ref,
        serve(cached) as svc,
    ):
        pairs = [(await new_session(svc), await new_session(ref)) for _ in range(3)]
        for i in range(4):
            for n, (session_id, ref_session) in enumerate(pairs):
                step = say(f"session {n} turn {i}", Reply(f"reply {n}.{i}"))
                assert await play(fake_llm, svc, session_id, step) == await play(
                    fake_llm, ref, ref_session, step
                )
                assert len(history_of(svc)) <= 2
        # Three sessions taking turns in a cache of two: each turn finds its session evicted.
        assert history_of(svc).rebuilds == 12 and history_of(svc).hits == 0


async def test_the_cache_holds_at_most_its_total_of_messages_however_long_the_sessions(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    # Room for many sessions but only 20 messages in all (a turn stores 2): long sessions evict
    # the least recently used ones instead of filling every session's window.
    cached = settings_for(
        make_settings, "small", context_max_messages=10, context_cache_messages=20
    )
    async with (
        serve(settings_for(make_settings, "rebuilt", context_cache_sessions=0)) as ref,
        serve(cached) as svc,
    ):
        history = history_of(svc)
        pairs = [(await new_session(svc), await new_session(ref)) for _ in range(3)]
        for i in range(4):
            for n, (session_id, ref_session) in enumerate(pairs):
                step = say(f"session {n} turn {i}", Reply(f"reply {n}.{i}"))
                assert await play(fake_llm, svc, session_id, step) == await play(
                    fake_llm, ref, ref_session, step
                )
                assert 0 < history.cached_messages <= 20
                held = sum(len(v.all_messages()) for v in history._views.values())
                assert held == history.cached_messages
        # By the third round each session's window (6+ messages) no longer fits beside two
        # others: turns rebuild, yet the model saw what the reference saw throughout.
        assert history.rebuilds > 3
        for session_id, _ in pairs:
            history.forget(session_id)
        assert history.cached_messages == 0 and len(history) == 0


async def test_a_turn_reads_only_the_messages_it_lacks(
    service: LiveService, fake_llm: FakeLLMServer
) -> None:
    session_id = await new_session(service)
    history = history_of(service)
    read: list[int] = []
    for i in range(12):
        before = history.messages_read
        if i % 3 == 1:
            fake_llm.enqueue(
                ToolCalls(ToolCall("get_current_time", {"timezone": "UTC"}, id=f"c{i}")),
                Reply("It is late."),
            )
        await post(service, session_id, f"message {i}")
        read.append(history.messages_read - before)
    # The first turn reads its one message; every later one reads its own user message only,
    # not the history before it, nor what the previous turn wrote (tool calls, results, reply).
    assert read == [1] * 12
    assert history.rebuilds == 1 and history.hits == 11
    # Deleting the session drops its history from memory.
    assert len(history) == 1
    assert (await service.client.delete(f"/v1/sessions/{session_id}")).status_code == 204
    assert len(history) == 0


# -- keys in commit order: several writer connections on PostgreSQL ------------------------------


@dataclass
class OnPostgres:
    db: PostgresDatabase
    turns: TurnStore
    messages: MessageStore
    history: SessionHistory
    session_id: str

    async def next_turn(self, content: str) -> Turn:
        accepted = await self.turns.accept(
            SessionWriter(self.session_id),
            tenant_id="t",
            session_id=self.session_id,
            content=content,
            token_estimate=1,
            client_message_id=None,
            policy="enqueue",
            max_queued=5,
        )
        assert accepted is not None
        claimed = await self.turns.claim_next(SessionWriter(self.session_id), self.session_id)
        assert claimed is not None
        return claimed.turn

    async def complete(self, turn: Turn, view: SessionView) -> None:
        """End the turn as the runner does and keep its view for the next."""

        def complete(tx: Tx) -> tuple[Message, Finished]:
            final = complete_turn(
                tx,
                turn,
                text=f"reply {turn.number}",
                token_estimate=1,
                model=None,
                rounds=1,
                prompt_tokens=0,
                completion_tokens=0,
            )
            added = count_added(
                tx, turn.session_id, after_turn=0, through_turn=turn.number, after_pk=view.watermark
            )
            return final, Finished({}, tx.now, added == 1)

        final, finished = await self.turns.transact(SessionWriter(self.session_id), complete)
        view.wrote(final)
        self.history.keep(view, finished)

    async def stored(self, through: int) -> list[str]:
        rows = await self.messages.for_context(self.session_id, through_turn=through)
        return [m.id for m in rows]


@pytest.fixture
async def on_postgres(pg_url: str) -> AsyncIterator[OnPostgres]:
    db = PostgresDatabase(
        pg_url, migrations_dir=PROJECT_ROOT / "migrations/postgres", write_connections=4
    )
    await db.open()
    session = await SessionStore(db).create("t", "u", {})
    messages = MessageStore(db)
    yield OnPostgres(
        db,
        TurnStore(db),
        messages,
        SessionHistory(
            messages,
            SnapshotStore(db),
            max_messages=1000,
            max_sessions=10,
            max_total_messages=10000,
        ),
        session.id,
    )
    await db.close()


async def held_open_while(pg: OnPostgres, turn: Turn, meanwhile: Awaitable[T]) -> T:
    """A write of the session from another writer connection (the watchdog's follow-up to
    `turn`), held open after its INSERT while `meanwhile` runs: until that has committed, or
    waits for a lock the held write has."""
    inserted, go = threading.Event(), threading.Event()

    def follow_up(tx: Tx) -> Message:
        message = turn_message(tx, turn, "assistant", "are you still there?", 5)
        inserted.set()
        go.wait(10)
        tx.emit(turn.session_id, "t", *events.message_completed(turn.id, message.id, "...", {}))
        return message

    held = asyncio.ensure_future(pg.turns.transact(another_lane(pg.db, pg.session_id), follow_up))
    try:
        assert await asyncio.to_thread(inserted.wait, 10)
        running = asyncio.ensure_future(meanwhile)
        await done_or_waiting_for_a_lock(pg.db, running)
    finally:
        go.set()
    await held
    return await running


@pytest.mark.parametrize("meanwhile", ["the turn completes", "the customer writes"])
async def test_a_message_committed_after_a_later_key_still_reaches_the_cached_view(
    on_postgres: OnPostgres, meanwhile: str
) -> None:
    """Two writer connections add to one session: one draws a message key and stays open while
    the other draws a larger one and commits, moving the cached view's watermark past the
    first key (the running turn completes; or the customer's next message is accepted and its
    turn opens the view). The first message must still reach the view when it commits: every
    transaction that adds a session's message locks the session's row before it draws the key,
    so the other waits for it and keys are drawn in commit order."""
    pg = on_postgres
    first = await pg.next_turn("hello")
    await pg.complete(first, await pg.history.open(first))

    async def customer_writes() -> tuple[Turn, SessionView]:
        turn = await pg.next_turn("are you there?")
        return turn, await pg.history.open(turn)

    if meanwhile == "the customer writes":
        second, view = await held_open_while(pg, first, customer_writes())
        await pg.complete(second, view)
    else:
        second = await pg.next_turn("are you there?")
        view = await pg.history.open(second)
        await held_open_while(pg, first, pg.complete(second, view))

    third = await pg.next_turn("thanks")
    view = await pg.history.open(third)
    assert pg.history.hits == 2  # (the cached view, not a rebuild)
    assert [m.id for m in view.all_messages()] == await pg.stored(third.number)
