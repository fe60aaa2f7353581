"""One owner per session across processes: two live services on one database (each its own
runtime, writer and lease owner; here in one test process), on one SQLite file and on one
PostgreSQL database.

A message posted to the process that does not own the session is queued for the owner and run
there; the busy policy holds across processes; a session whose owner stopped renewing its
lease is taken over by another process's sweeper."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from app.conversation.claims import Claims
from app.llm.testing import FakeLLMServer, Reply
from app.principal import LOCAL
from app.runtime import Runtime
from app.storage.records import Turn
from app.storage.session_writer import SessionWriter
from app.testing import LiveService, read_events, serve
from tests.conftest import new_session


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


LEASES = {"session_lease_s": 1.5, "session_lease_renew_s": 0.3, "session_lease_sweep_s": 0.1}


@contextlib.asynccontextmanager
async def two_services(make_settings: Any, **overrides: Any) -> AsyncIterator[list[LiveService]]:
    """A and B on one SQLite file; each answers with its own model name, so a turn's `model`
    says which process ran it."""
    async with (
        serve(make_settings(model="openai/model-a", **LEASES, **overrides)) as a,
        serve(make_settings(model="openai/model-b", **LEASES, **overrides)) as b,
    ):
        yield [a, b]


async def until(check: Callable[[], Awaitable[bool]], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def finished(runtime: Runtime, session_id: str, turn_id: str) -> Turn:
    found: list[Turn] = []

    async def done() -> bool:
        turn = await runtime.conversation.turns.get(session_id, turn_id)
        if turn is not None and turn.finished:
            found.append(turn)
        return bool(found)

    await until(done)
    return found[0]


async def post_first_event(
    client: httpx.AsyncClient, session_id: str, content: str
) -> tuple[int, str | None, str]:
    """POST a message as a stream; (status, the turn's id, the first event's type)."""
    async with client.stream(
        "POST",
        f"/v1/sessions/{session_id}/messages",
        json={"content": content},
        headers={"Accept": "text/event-stream"},
    ) as response:
        if response.status_code != 200:
            await response.aread()
            return response.status_code, None, response.json()["error"]["code"]
        async for event in read_events(response, limit=1):
            return 200, str(event.data["turn_id"]), event.event
    raise AssertionError("the stream ended without an event")


async def test_a_message_posted_elsewhere_is_queued_for_the_owner_and_run_there(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Reply("first, slowly", delay=1.0), model="model-a")
    async with two_services(make_settings, busy_policy="enqueue") as (a, b):
        session_id = await new_session(a)
        running = asyncio.create_task(post_first_event(a.client, session_id, "one"))
        await until(lambda: _running_on(a, session_id))

        status, turn_id, first = await post_first_event(b.client, session_id, "two")

        assert (status, first) == (200, "turn.queued")
        assert turn_id is not None
        turn = await finished(a.runtime, session_id, turn_id)
        assert (turn.status, turn.model) == ("completed", "model-a")
        await running
        assert fake_llm.requests_for("model-b") == []
        # The owner let go once nothing was left: B runs the next message itself.
        status, turn_id, _ = await post_first_event(b.client, session_id, "three")
        assert status == 200 and turn_id is not None
        turn = await finished(b.runtime, session_id, turn_id)
        assert (turn.status, turn.model) == ("completed", "model-b")


async def _running_on(service: LiveService, session_id: str) -> bool:
    return service.runtime.manager.running(session_id) is not None


async def test_concurrent_posts_through_two_processes_accept_one_and_reject_the_other(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    fake_llm.default = Reply("one at a time", delay=0.3)
    async with two_services(make_settings, busy_policy="reject") as (a, b):
        for round_ in range(5):
            session_id = await new_session(a)
            results = await asyncio.gather(
                post_first_event(a.client, session_id, f"from A {round_}"),
                post_first_event(b.client, session_id, f"from B {round_}"),
            )
            assert sorted(status for status, _, _ in results) == [200, 409], results
            assert [code for status, _, code in results if status == 409] == ["session_busy"]
            (turn_id,) = [t for _, t, _ in results if t is not None]
            assert (await finished(a.runtime, session_id, turn_id)).status == "completed"


async def test_a_session_whose_owner_stopped_renewing_is_taken_over(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    async with serve(make_settings(**LEASES)) as b:
        session_id = await new_session(b)
        turns = b.runtime.conversation.turns
        accept = {
            "tenant_id": LOCAL.tenant_id,
            "session_id": session_id,
            "token_estimate": 1,
            "client_message_id": None,
            "policy": "enqueue",
            "max_queued": 10,
        }
        # Another process (on another machine) claimed a turn and then went silent.
        stranded = await turns.accept(SessionWriter(session_id), content="left running", **accept)
        owned = await Claims(turns).owned(
            SessionWriter(session_id), owner="elsewhere:7:dead", ttl_s=1.0
        )
        assert stranded is not None and owned.claimed is not None
        waiting = await turns.accept(
            SessionWriter(session_id), content="queued behind it", **accept
        )
        assert waiting is not None

        interrupted = await finished(b.runtime, session_id, stranded.turn.id)
        completed = await finished(b.runtime, session_id, waiting.turn.id)

        assert (interrupted.status, interrupted.error_code) == ("failed", "interrupted")
        assert completed.status == "completed"
        leases = b.runtime.manager.leases
        assert leases is not None
        holder = await leases.store.holder(session_id)
        assert holder is not None and holder[:2] == (leases.owner, 2)


async def test_a_process_starting_up_leaves_a_live_owners_running_turn_alone(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Reply("finished where it started", delay=1.0), model="model-a")
    async with serve(make_settings(model="openai/model-a", **LEASES)) as a:
        session_id = await new_session(a)
        running = asyncio.create_task(post_first_event(a.client, session_id, "one"))
        await until(lambda: _running_on(a, session_id))
        _, turn_id, _ = await running

        async with serve(make_settings(model="openai/model-b", **LEASES)) as b:
            assert turn_id is not None
            turn = await finished(b.runtime, session_id, turn_id)

        assert (turn.status, turn.model) == ("completed", "model-a")


async def test_an_owner_that_lost_its_lease_mid_turn_writes_nothing_more(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Reply("the stale owner's answer", delay=1.0), model="model-a")
    async with two_services(make_settings) as (a, b):
        session_id = await new_session(a)
        running = asyncio.create_task(post_first_event(a.client, session_id, "one"))
        await until(lambda: _running_on(a, session_id))
        _, turn_id, _ = await running
        assert turn_id is not None
        # A hangs past its lease (here: the lease is let go under it); B's sweeper takes over.
        await a.runtime.conversation.turns.transact(
            SessionWriter(session_id),
            lambda tx: tx.execute(
                "UPDATE session_leases SET expires_at = 0 WHERE session_id = ?", (session_id,)
            ),
        )

        turn = await finished(b.runtime, session_id, turn_id)
        assert (turn.status, turn.error_code) == ("failed", "interrupted")
        await until(lambda: _idle(a, session_id))
        await until(lambda: _idle(b, session_id))

        log = await b.runtime.conversation.events.after(session_id, 0)
        assert [e.type for e in log if e.turn_id == turn_id][-1] == "turn.failed"
        assert "turn.completed" not in [e.type for e in log]
        messages, _ = await b.runtime.conversation.messages.page(LOCAL.tenant_id, session_id)
        assert [m.role for m in messages] == ["user"]


async def test_a_turn_whose_lease_is_taken_mid_turn_stops_as_taken_over_not_as_a_fault(
    make_settings: Any, fake_llm: FakeLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    # (LeaseLost is a Fault: a handler for faults written before its own took it for a bug.)
    fake_llm.enqueue(Reply("the stale owner's answer", delay=1.5), model="model-a")
    async with two_services(make_settings) as (a, b):
        session_id = await new_session(a)
        running = asyncio.create_task(post_first_event(a.client, session_id, "one"))
        await until(lambda: _running_on(a, session_id))
        _, turn_id, _ = await running
        # A stops renewing this lease without noticing (it looks hung to B), so A's turn is
        # still running when B takes over: its next write meets the lost lease itself.
        leases = a.runtime.manager.leases
        assert leases is not None
        leases.owned.pop(session_id)
        await a.runtime.conversation.turns.transact(
            SessionWriter(session_id),
            lambda tx: tx.execute(
                "UPDATE session_leases SET expires_at = 0 WHERE session_id = ?", (session_id,)
            ),
        )
        caplog.set_level("WARNING", logger="app.conversation.manager")

        turn = await finished(b.runtime, session_id, str(turn_id))
        assert (turn.status, turn.error_code) == ("failed", "interrupted")
        await until(lambda: _idle(a, session_id))

        said = [r.getMessage() for r in caplog.records if r.name == "app.conversation.manager"]
        assert f"turn {turn_id} stopped: its session was taken over" in said, said
        assert not [line for line in said if "failed unexpectedly" in line], said
        messages, _ = await b.runtime.conversation.messages.page(LOCAL.tenant_id, session_id)
        assert [m.role for m in messages] == ["user"]


async def _idle(service: LiveService, session_id: str) -> bool:
    return service.runtime.manager.running(session_id) is None


async def test_another_processs_watchdog_leaves_the_owners_long_step_alone(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Reply("slow but fine", delay=1.0), model="model-a")
    async with (
        serve(make_settings(model="openai/model-a", **LEASES)) as a,
        serve(make_settings(model="openai/model-b", step_stuck_after_s=0.1, **LEASES)) as b,
    ):
        session_id = await new_session(a)
        running = asyncio.create_task(post_first_event(a.client, session_id, "one"))
        await until(lambda: _running_on(a, session_id))
        _, turn_id, _ = await running
        assert turn_id is not None
        checks = 0
        while a.runtime.manager.running(session_id) is not None:
            stuck, _ = await b.runtime.watchdog.check()  # B would call A's model step stuck
            assert stuck == []
            checks += 1
            await asyncio.sleep(0.05)
        assert checks > 5
        turn = await finished(a.runtime, session_id, turn_id)
        assert turn.status == "completed"
