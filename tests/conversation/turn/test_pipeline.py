"""What one turn costs the database, counted (not timed): statements, write jobs, reads and
events of a plain turn and of an order-status turn stay within fixed bounds, whatever the
session's length, and the counts reach Prometheus."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

import pytest

from app.conversation.loop import TurnOutcome
from app.conversation.turn import pipeline as pipeline_module
from app.demo.fixtures import LI_LEI, SHIPPED_ORDER
from app.errors import UpstreamLLMError
from app.llm.testing import Fail, FakeLLMServer, Reply, ToolCall, ToolCalls
from app.principal import LOCAL
from app.storage.fence import Fence, LeaseLost
from app.storage.leases import LeaseStore
from app.storage.port import DbCounts
from app.storage.records import Turn
from app.storage.session_writer import SessionWriter
from app.testing import LiveService, serve
from tests.conftest import new_session
from tests.conversation.core import RAN, SYSTEM_PROMPT, Core, open_core, types

# Before this was counted and cut (8bfc37a), a plain turn took 16 write jobs, 14 events, ~55
# statements and 9 reads; an order-status turn 25 jobs, 21 events, ~90 statements. Now a plain
# turn's jobs are: accept, claim, the model step's start (carrying the NLU record), the first
# streamed text, and the turn's end (carrying the rest of the text and the model step's end).
# Reads: the session's history (two the first time, one later), the confirmation and memory
# checks, and the JSON answer's wait (the event log, maybe the session's existence, the turn
# and its message). Session leases (one owner per session) add a job, the claim that finds
# nothing more and lets the lease go, and a statement to each job: the fencing check. The
# accept and the claim stopped re-reading what they hold (the sequence, the turn, the user).
# The wait's follower reads the log once more when live events reach it while its first read
# is still out (timing: seen on a loaded machine). Budgets add one statement to the turn's end:
# the tenant's usage of the day (the session's rides on the end's own update of the session).
# A tool step with an expected output schema adds one: storing the schema once (`step_schemas`;
# a lookup that writes nothing once the schema is there) so the step only refers to it (a model
# step's schema, always the same, is not stored: one statement less per model call).
# The turn's end adds one: deleting its superseded events (the deltas, earlier step states,
# started tool calls that completed).
PLAIN = DbCounts(jobs=6, writes=45, reads=9, events=8)
ORDER_STATUS = DbCounts(jobs=10, writes=74, reads=9, events=15)


async def idle(svc: LiveService) -> None:
    """The session's worker has finished: everything the turn writes has been written."""
    deadline = time.monotonic() + 10
    while svc.runtime.manager.active_sessions():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.005)


async def turn_cost(svc: LiveService, session_id: str, content: str) -> DbCounts:
    await idle(svc)
    before = svc.runtime.db.counts()
    response = await svc.client.post(
        f"/v1/sessions/{session_id}/messages", json={"content": content}
    )
    assert response.status_code == 200, response.text
    await idle(svc)
    return svc.runtime.db.counts() - before


def within(cost: DbCounts, bound: DbCounts) -> bool:
    return (
        cost.jobs <= bound.jobs
        and cost.writes <= bound.writes
        and cost.reads <= bound.reads
        and cost.events <= bound.events
        and cost.commits <= cost.jobs
    )


async def scrape(svc: LiveService) -> dict[str, float]:
    text = (await svc.client.get("/metrics")).text
    return {
        name: float(value)
        for name, value in re.findall(r"^(hermes_(?:db|event)\S*) (\S+)$", text, re.MULTILINE)
    }


async def test_a_plain_turn_costs_a_bounded_number_of_writes_reads_and_events(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    # A long flush interval: the reply's pieces always coalesce the same way, however slowly
    # this machine streams them. The lease sweep (two reads a second, not the turn's) is held
    # off, or a slow machine counts it inside a turn.
    async with serve(make_settings(delta_flush_ms=1000, session_lease_sweep_s=3600)) as svc:
        session_id = await new_session(svc)
        costs = [await turn_cost(svc, session_id, f"hello number {i}") for i in range(25)]
        scraped_before = await scrape(svc)
        last = await turn_cost(svc, session_id, "one more")
        scraped = await scrape(svc)
    for cost in [*costs, last]:
        assert within(cost, PLAIN), cost
    # The 25th turn of a session writes what the 2nd does.
    assert costs[-1].writes == costs[1].writes and costs[-1].jobs == costs[1].jobs
    assert scraped["hermes_db_commits_total"] - scraped_before["hermes_db_commits_total"] >= 1
    assert scraped["hermes_db_jobs_total"] - scraped_before["hermes_db_jobs_total"] == last.jobs
    assert scraped["hermes_events_total"] - scraped_before["hermes_events_total"] == last.events
    write = 'hermes_db_statements_total{kind="write"}'
    assert scraped[write] - scraped_before[write] == last.writes
    busy = "hermes_db_writer_busy_seconds_total"
    assert 0 < scraped[busy] - scraped_before[busy] == pytest.approx(last.busy_s)
    assert scraped["hermes_db_writer_connections"] == 1  # SQLite writes on one


async def test_an_order_status_turn_costs_a_bounded_number_of_writes_reads_and_events(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    async with serve(make_settings(delta_flush_ms=1000, session_lease_sweep_s=3600)) as svc:
        session_id = await new_session(svc, user_id=LI_LEI)
        costs = []
        for _ in range(3):
            fake_llm.enqueue(
                ToolCalls(ToolCall("query_order_status", {"order_id": SHIPPED_ORDER})),
                Reply("Your order has shipped and arrives tomorrow."),
            )
            costs.append(await turn_cost(svc, session_id, f"where is my order {SHIPPED_ORDER}"))
    tools = [r.body for r in fake_llm.requests if r.body.get("tools")]
    assert tools and "query_order_status" in str(tools[0]["tools"])
    for cost in costs:
        assert within(cost, ORDER_STATUS), cost


# -- in-process: the pipeline on the turn core, no socket (tests/conversation/core.py) ------


async def run_turn(core: Core, session_id: str, text: str) -> tuple[Turn, TurnOutcome]:
    await core.accept(session_id, text)
    claimed = await core.turns.claim_next(SessionWriter(session_id), session_id)
    assert claimed is not None
    outcome = await core.pipeline.run(
        SessionWriter(claimed.turn.session_id), claimed.turn, claimed.user_id
    )
    stored = await core.turns.get(session_id, claimed.turn.id)
    assert stored is not None
    return stored, outcome


async def test_one_turn_stores_the_reply_snapshot_and_events(tmp_path: Path) -> None:
    async with open_core(tmp_path, Reply("Hi! How can I help?", chunks=1)) as core:
        session_id = await core.new_session()

        turn, outcome = await run_turn(core, session_id, "hello")

        assert (turn.status, outcome.text) == ("completed", "Hi! How can I help?")
        assert await core.reply(turn) == "Hi! How can I help?"
        # The log keeps what the turn's end did not delete (its delta: the reply is whole in
        # message.completed).
        assert types(await core.log(session_id), turn_id=turn.id) == [
            "turn.started",
            "message.completed",
            "turn.completed",
        ]
        [request] = core.model.requests
        assert [(m["role"], m["content"]) for m in request.messages] == [
            ("system", SYSTEM_PROMPT),
            ("user", "hello"),
        ]
        snapshot = await core.snapshots.get(session_id)
        assert snapshot is not None
        assert (snapshot.active_goal, snapshot.state["last_turn"]) == ("hello", 1)
        # A reply that asks something waits for the user's answer.
        steps = await core.steps.for_session(LOCAL.tenant_id, session_id, turn.id)
        assert [(s.action_type, s.status) for s in steps][-1] == ("ask_user", "running")


async def test_a_turn_with_a_tool_records_call_result_and_completed_step(tmp_path: Path) -> None:
    async with open_core(
        tmp_path,
        ToolCalls(ToolCall("lookup", {"key": "k"}, id="c1")),
        Reply("k is known.", chunks=1),
    ) as core:
        session_id = await core.new_session()

        turn, _ = await run_turn(core, session_id, "look k up")

        assert (turn.status, turn.rounds) == ("completed", 1)
        stored = await core.history(session_id)
        assert [(m.role, m.tool_call_id) for m in stored] == [
            ("user", None),
            ("assistant", None),
            ("tool", "c1"),
            ("assistant", None),
        ]
        assert stored[-1].content == "k is known."
        # tool.started and the delta are superseded (tool.completed, message.completed).
        assert types(await core.log(session_id), turn_id=turn.id) == [
            "turn.started",
            "tool.completed",
            "message.completed",
            "turn.completed",
        ]
        snapshot = await core.snapshots.get(session_id)
        assert snapshot is not None
        assert snapshot.completed_steps == [
            {"turn": 1, "tool": "lookup", "call_id": "c1", "status": "success"}
        ]


async def test_a_failing_model_leaves_the_turn_to_its_manager_with_its_records_kept(
    tmp_path: Path,
) -> None:
    async with open_core(
        tmp_path, ToolCalls(ToolCall("save_note", {"text": "once"}, id="c1")), Fail(503)
    ) as core:
        session_id = await core.new_session()
        await core.accept(session_id, "note this")
        claimed = await core.turns.claim_next(SessionWriter(session_id), session_id)
        assert claimed is not None

        with pytest.raises(UpstreamLLMError):
            await core.pipeline.run(
                SessionWriter(claimed.turn.session_id), claimed.turn, claimed.user_id
            )

        turn = await core.turns.get(session_id, claimed.turn.id)
        assert turn is not None and turn.status == "running"  # the manager fails it
        await eventually_stored(core, session_id, 3)
        assert [m.role for m in await core.history(session_id)] == ["user", "assistant", "tool"]

        # Resumed from the failed model step: the note is not written again.
        await core.turns.fail(
            SessionWriter(claimed.turn.session_id), claimed.turn, "llm_unavailable", "down"
        )
        steps = await core.steps.for_session(LOCAL.tenant_id, session_id, claimed.turn.id)
        failed = [s for s in steps if s.status == "failed"]
        assert [s.action_type for s in failed] == ["generate_response"]
        reopened = await core.turns.reopen(
            SessionWriter(claimed.turn.session_id), claimed.turn, failed[0].id
        )
        assert reopened is not None
        core.model.enqueue(Reply("Noted."))
        again = await core.turns.claim_next(SessionWriter(session_id), session_id)
        assert again is not None

        outcome = await core.pipeline.run(
            SessionWriter(again.turn.session_id), again.turn, again.user_id
        )

        assert (outcome.text, outcome.rounds) == ("Noted.", 1)
        assert RAN == [("save_note", {"text": "once"})]
        last = core.model.requests[-1].messages
        assert [m["role"] for m in last] == ["system", "user", "assistant", "tool"]


async def eventually_stored(core: Core, session_id: str, count: int) -> None:
    """A failed turn's deferred writes go out on their own, without being awaited."""
    deadline = time.monotonic() + 5
    while len(await core.history(session_id)) < count:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.005)


async def test_history_and_snapshot_after_several_turns(tmp_path: Path) -> None:
    async with open_core(
        tmp_path, Reply("one"), ToolCalls(ToolCall("lookup", {"key": "b"})), Reply("two")
    ) as core:
        core.model.enqueue(Reply("three"))
        session_id = await core.new_session()

        for text in ("first", "second", "third"):
            await run_turn(core, session_id, text)

        last = core.model.requests[-1].messages
        # The system prompt, and the goal the session started with, kept in view.
        assert [m["content"] for m in last if m["role"] == "system"][1].endswith("\nfirst")
        assert [m["role"] for m in last if m["role"] != "system"] == [
            "user",
            "assistant",
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
        ]
        assert [m["content"] for m in last if m["role"] == "user"] == ["first", "second", "third"]
        snapshot = await core.snapshots.get(session_id)
        assert snapshot is not None
        assert (snapshot.active_goal, snapshot.state["last_turn"]) == ("first", 3)
        assert [s["turn"] for s in snapshot.completed_steps] == [2]
        stored = await core.history(session_id)
        assert [m.turn_number for m in stored] == [1, 1, 2, 2, 2, 2, 3, 3]


async def test_the_turn_path_drawn_in_the_pipeline_is_the_one_assembled(tmp_path: Path) -> None:
    """The docstring of app/conversation/turn/pipeline.py names the stages in the order the
    turn core is assembled with; the picture stays true."""
    drawn = [
        name
        for line in (pipeline_module.__doc__ or "").splitlines()
        if line.startswith("  ") and not line.startswith("   ")
        for name in line.split("  ")[1].split(", ")
    ]
    async with open_core(tmp_path) as core:
        assembled = [type(stage).__name__ for stage in core.pipeline.stages]
    assert drawn == ["TurnOpening", *assembled]


async def test_the_writer_it_is_handed_fences_every_write_of_the_turn(tmp_path: Path) -> None:
    """The pipeline writes with the handle its worker passes in: under a lease another owner
    has taken over since, the turn writes nothing (`LeaseLost`); under the lease held now, the
    same turn completes."""
    async with open_core(tmp_path, Reply("Hi!", chunks=1)) as core:
        session_id = await core.new_session()
        leases = LeaseStore(core.db)
        assert await leases.acquire(session_id, "owner-a", 30) == 1
        stale = Fence(session_id, "owner-a", 1)
        await leases.release(stale)
        assert await leases.acquire(session_id, "owner-b", 30) == 2  # taken over
        await core.accept(session_id, "hello")
        claimed = await core.turns.claim_next(SessionWriter(session_id), session_id)
        assert claimed is not None
        before = await core.log(session_id)

        with pytest.raises(LeaseLost):
            await core.pipeline.run(SessionWriter(session_id, stale), claimed.turn, "u1")

        assert await core.log(session_id) == before
        assert [m.role for m in await core.history(session_id)] == ["user"]
        held = SessionWriter(session_id, Fence(session_id, "owner-b", 2))
        outcome = await core.pipeline.run(held, claimed.turn, "u1")
        assert outcome.text == "Hi!"
