"""TurnManager in-process: one worker per busy session runs its turns in order; the busy policy
and the queue limit for a second message while a turn runs; ending turns from outside (abort,
cancel, timeout, shutdown); queued turns picked up at start-up."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from app.errors import QueueFull, SessionBusy
from app.llm.testing import Fail, Hang, Reply
from app.principal import LOCAL
from app.storage.records import Event
from tests.conversation.core import Core, eventually, open_core


async def started(core: Core, session_id: str, requests: int = 1) -> Any:
    """The session's running turn, once the model has been asked `requests` times in all."""
    await eventually(lambda: len(core.model.requests) >= requests)
    return core.manager.running(session_id)


async def test_queued_turns_of_a_session_run_one_at_a_time_in_order(tmp_path: Path) -> None:
    async with open_core(
        tmp_path, Reply("one", delay=0.02), Reply("two"), Reply("three"), busy_policy="enqueue"
    ) as core:
        session_id = await core.new_session()
        posted = [
            await core.service.post_message(LOCAL, session_id, text, None)
            for text in ("first", "second", "third")
        ]
        assert [p.ahead for p in posted] == [0, 1, 2]

        turns = [await core.finished(p.turn) for p in posted]

        assert [t.status for t in turns] == ["completed"] * 3
        assert [await core.reply(t) for t in turns] == ["one", "two", "three"]
        # Each turn starts only after the one before it has ended.
        log = [(e.type, e.turn_id) for e in await core.log(session_id)]
        ends = [log.index(("turn.completed", t.id)) for t in turns]
        starts = [log.index(("turn.started", t.id)) for t in turns]
        assert starts[0] < ends[0] < starts[1] < ends[1] < starts[2] < ends[2]
        # The model saw each earlier exchange before answering the next message.
        last = core.model.requests[-1].messages
        assert [m["content"] for m in last if m["role"] in ("user", "assistant")] == [
            "first",
            "one",
            "second",
            "two",
            "third",
        ]
        await eventually(lambda: core.manager.active_sessions() == 0)


async def test_reject_policy_refuses_a_second_message_while_a_turn_runs(tmp_path: Path) -> None:
    async with open_core(tmp_path, Hang(), Reply("later"), busy_policy="reject") as core:
        session_id = await core.new_session()
        first = await core.service.post_message(LOCAL, session_id, "first", None)
        await started(core, session_id)

        with pytest.raises(SessionBusy):
            await core.service.post_message(LOCAL, session_id, "second", None)

        assert [m.content for m in await core.history(session_id)] == ["first"]
        assert await core.manager.abort(first.turn.id, "test_ended", "ended by the test")
        assert (await core.finished(first.turn)).error_code == "test_ended"
        # Once the session is idle again, a message is accepted and runs.
        again = await core.service.post_message(LOCAL, session_id, "second", None)
        assert await core.reply(await core.finished(again.turn)) == "later"


async def test_enqueue_policy_queues_up_to_the_limit(tmp_path: Path) -> None:
    async with open_core(
        tmp_path, Hang(), Reply("second"), busy_policy="enqueue", max_queued=1
    ) as core:
        session_id = await core.new_session()
        first = await core.service.post_message(LOCAL, session_id, "first", "m-1")
        await started(core, session_id)
        second = await core.service.post_message(LOCAL, session_id, "second", None)
        assert (second.created, second.ahead, second.turn.status) == (True, 1, "queued")

        with pytest.raises(QueueFull):
            await core.service.post_message(LOCAL, session_id, "third", None)
        # A retried message is not a new one: it gets its turn back even with the queue full.
        retried = await core.service.post_message(LOCAL, session_id, "first", "m-1")
        assert (retried.created, retried.turn.id) == (False, first.turn.id)

        assert [m.content for m in await core.history(session_id)] == ["first", "second"]
        await core.manager.abort(first.turn.id, "test_ended", "ended by the test")
        assert await core.reply(await core.finished(second.turn)) == "second"


async def test_abort_ends_the_running_turn_and_the_worker_goes_on(tmp_path: Path) -> None:
    async with open_core(tmp_path, Hang(), Reply("next one"), busy_policy="enqueue") as core:
        session_id = await core.new_session()
        first = await core.service.post_message(LOCAL, session_id, "first", None)
        running = await started(core, session_id)
        assert running.id == first.turn.id
        second = await core.service.post_message(LOCAL, session_id, "second", None)

        assert await core.manager.abort(first.turn.id, "step_stuck", "a step got stuck")
        assert not await core.manager.abort("turn_unknown", "x", "y")

        failed = await core.finished(first.turn)
        assert (failed.status, failed.error_code, failed.error_message) == (
            "failed",
            "step_stuck",
            "a step got stuck",
        )
        assert await core.reply(await core.finished(second.turn)) == "next one"
        # The aborted turn's open model step was closed with it.
        steps = await core.steps.for_session(LOCAL.tenant_id, session_id, first.turn.id)
        assert steps and all(s.status != "running" for s in steps)


async def test_an_abort_as_the_turn_ends_finds_nothing_to_end_and_the_worker_goes_on(
    tmp_path: Path,
) -> None:
    async with open_core(
        tmp_path, Fail(503, "down"), Reply("next one"), busy_policy="enqueue"
    ) as core:
        session_id = await core.new_session()
        with core.bus.subscribe(session_id) as sub:
            first = await core.service.post_message(LOCAL, session_id, "first", None)
            second = await core.service.post_message(LOCAL, session_id, "second", None)
            async with asyncio.timeout(5):
                while True:  # the first turn's end, the moment it is committed
                    event = await sub.get(5)
                    if isinstance(event, Event) and event.terminal:
                        break
            # The worker still holds the turn (it closes its steps): a cancel, a watchdog now
            # find it over, and neither cuts the closing short nor stops the worker.
            assert core.manager.running(session_id) is not None
            assert not await core.manager.abort(first.turn.id, "cancelled", "too late")

        failed = await core.finished(first.turn)
        assert (failed.status, failed.error_code) == ("failed", "llm_unavailable")
        assert await core.reply(await core.finished(second.turn)) == "next one"
        steps = await core.steps.for_session(LOCAL.tenant_id, session_id, first.turn.id)
        assert steps and all(s.status != "running" for s in steps)


async def test_cancel_stops_the_worker_and_leaves_queued_turns_queued(tmp_path: Path) -> None:
    async with open_core(tmp_path, Hang(), Reply("resumed"), busy_policy="enqueue") as core:
        session_id = await core.new_session()
        first = await core.service.post_message(LOCAL, session_id, "first", None)
        await started(core, session_id)
        second = await core.service.post_message(LOCAL, session_id, "second", None)

        await core.manager.cancel(session_id, "session_deleted", "the session was deleted")

        assert (await core.finished(first.turn)).error_code == "session_deleted"
        assert core.manager.active_sessions() == 0
        waiting = await core.turns.get(session_id, second.turn.id)
        assert waiting is not None and waiting.status == "queued"
        core.manager.wake(session_id)
        assert await core.reply(await core.finished(second.turn)) == "resumed"


async def test_a_turn_over_its_time_limit_fails_with_turn_timeout(tmp_path: Path) -> None:
    async with open_core(tmp_path, Hang(), turn_timeout_s=0.1) as core:
        session_id = await core.new_session()
        posted = await core.service.post_message(LOCAL, session_id, "hi", None)

        turn = await core.finished(posted.turn)

        assert (turn.status, turn.error_code) == ("failed", "turn_timeout")


async def test_a_model_failure_fails_the_turn_and_the_session_carries_on(tmp_path: Path) -> None:
    async with open_core(tmp_path, Fail(503, "down"), Reply("back again")) as core:
        session_id = await core.new_session()
        first = await core.service.post_message(LOCAL, session_id, "hi", None)

        failed = await core.finished(first.turn)
        assert (failed.status, failed.error_code) == ("failed", "llm_unavailable")
        event = (await core.log(session_id))[-1]
        assert (event.type, event.data["code"]) == ("turn.failed", "llm_unavailable")

        second = await core.service.post_message(LOCAL, session_id, "hi again", None)
        assert await core.reply(await core.finished(second.turn)) == "back again"


async def test_shutdown_interrupts_what_is_still_running(tmp_path: Path) -> None:
    async with open_core(tmp_path, Hang()) as core:
        session_id = await core.new_session()
        posted = await core.service.post_message(LOCAL, session_id, "hi", None)
        await started(core, session_id)

        await core.manager.shutdown(grace_s=0.01)

        turn = await core.turns.get(session_id, posted.turn.id)
        assert turn is not None and (turn.status, turn.error_code) == ("failed", "interrupted")
        core.manager.wake(session_id)  # a closing manager starts nothing new
        assert core.manager.active_sessions() == 0


async def test_turns_queued_before_a_restart_run_when_it_resumes(tmp_path: Path) -> None:
    async with open_core(tmp_path, Reply("a"), Reply("b")) as core:
        sessions = [await core.new_session() for _ in range(2)]
        queued = [(await core.accept(s, "waiting since before")).turn for s in sessions]

        await core.manager.resume_queued()

        assert {await core.reply(await core.finished(t)) for t in queued} == {"a", "b"}
