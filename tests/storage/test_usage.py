"""Usage counts for budgets, on both engines: a turn's usage is added with its end (completed
or failed), to its session and to its tenant's UTC day; a turn ended twice counts once."""

from __future__ import annotations

import time
from typing import Any

import pytest

from app.storage.session_writer import SessionWriter
from app.storage.sessions import SessionStore
from app.storage.turns import TurnStore, complete_turn
from app.storage.usage import Usage, UsageStore, seconds_to_next_day, utc_day

DAY = 1_780_000_000.0  # some UTC day, mid-day


def test_days_are_utc_and_end_at_midnight() -> None:
    midnight = DAY - DAY % 86400
    assert utc_day(midnight) != utc_day(midnight - 1)
    assert utc_day(midnight) == utc_day(midnight + 86399)
    assert seconds_to_next_day(midnight + 86399) == 1
    assert seconds_to_next_day(midnight) == 86400


async def running_turn(turns: TurnStore, tenant: str, session_id: str) -> Any:
    """A turn accepted and claimed: its worker would run it now."""
    accepted = await turns.accept(
        SessionWriter(session_id),
        tenant_id=tenant,
        session_id=session_id,
        content="hi",
        token_estimate=1,
        client_message_id=None,
        policy="enqueue",
        max_queued=10,
    )
    assert accepted is not None
    claimed = await turns.claim_next(SessionWriter(session_id), session_id)
    assert claimed is not None
    return claimed.turn


async def test_usage_is_added_with_the_turns_end(open_db: Any) -> None:
    db = await open_db()
    sessions, turns, usage = SessionStore(db), TurnStore(db), UsageStore(db)
    first = (await sessions.create("acme", "u1", {})).id
    second = (await sessions.create("acme", "u2", {})).id
    other = (await sessions.create("zeta", "u1", {})).id

    turn = await running_turn(turns, "acme", first)
    await turns.transact(
        SessionWriter(turn.session_id),
        lambda tx: complete_turn(
            tx,
            turn,
            text="ok",
            token_estimate=1,
            model="m",
            rounds=0,
            prompt_tokens=10,
            completion_tokens=5,
            usage=Usage(15, 0.25),
        ),
    )
    turn = await running_turn(turns, "acme", second)
    await turns.fail(
        SessionWriter(turn.session_id), turn, "budget_exceeded", "over", usage=Usage(40, 0.5)
    )
    # Failing it again (already finished) adds nothing.
    await turns.fail(
        SessionWriter(turn.session_id), turn, "budget_exceeded", "over", usage=Usage(40, 0.5)
    )
    turn = await running_turn(turns, "zeta", other)
    await turns.fail(
        SessionWriter(turn.session_id), turn, "llm_unavailable", "down", usage=Usage(7, 0)
    )

    assert await usage.of_session("acme", first) == Usage(15, 0.25)
    assert await usage.of_session("acme", second) == Usage(40, 0.5)
    # Scoped by tenant: another tenant's session reads as unused.
    assert await usage.of_session("acme", other) == Usage()
    today = await usage.of_tenant_day("acme", time.time())
    assert today.tokens == 55 and today.cost == pytest.approx(0.75)
    assert await usage.of_tenant_day("zeta", time.time()) == Usage(7, 0)
    assert await usage.of_tenant_day("acme", time.time() - 86400) == Usage()
