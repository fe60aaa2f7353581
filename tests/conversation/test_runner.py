"""What one turn costs the database, counted (not timed): statements, write jobs, reads and
events of a plain turn and of an order-status turn stay within fixed bounds, whatever the
session's length, and the counts reach Prometheus."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from app.demo.fixtures import LI_LEI, SHIPPED_ORDER
from app.llm.testing import FakeLLMServer, Reply, ToolCall, ToolCalls
from app.storage.sqlite import DbCounts
from app.testing import LiveService, serve
from tests.conftest import new_session

# Before this was counted and cut (8bfc37a), a plain turn took 16 write jobs, 14 events, ~55
# statements and 9 reads; an order-status turn 25 jobs, 21 events, ~90 statements. Now a plain
# turn's jobs are: accept, claim, the model step's start (carrying the NLU record), the first
# streamed text, and the turn's end (carrying the rest of the text and the model step's end).
# Reads: the session's history (two the first time, one later), the confirmation and memory
# checks, and the JSON answer's wait (the event log, maybe the session's existence, the turn
# and its message).
PLAIN = DbCounts(jobs=5, writes=36, reads=8, events=8)
ORDER_STATUS = DbCounts(jobs=9, writes=59, reads=8, events=15)


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
    # this machine streams them.
    async with serve(make_settings(delta_flush_ms=1000)) as svc:
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


async def test_an_order_status_turn_costs_a_bounded_number_of_writes_reads_and_events(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    async with serve(make_settings(delta_flush_ms=1000)) as svc:
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
