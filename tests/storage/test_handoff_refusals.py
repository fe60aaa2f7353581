"""The handoff store's answers "no" (another agent holds the session, nobody does, no such
session) are values of its jobs: they commit with their batch instead of making the writer run
the batch again, each job in a savepoint."""

from __future__ import annotations

from typing import Any

import pytest

from app.errors import HandoffConflict, HandoffNotFound, NotHandoffAgent, SessionNotFound
from app.storage.handoffs import HandoffStore
from app.storage.session_writer import SessionWriter
from app.storage.sessions import SessionStore
from tests.storage.batches import beside_a_batchmate

TENANT = "default"


async def test_refused_desk_actions_leave_the_other_jobs_of_their_batch_run_once(
    open_db: Any,
) -> None:
    db = await open_db()
    sessions, handoffs = SessionStore(db), HandoffStore(db)
    held = (await sessions.create(TENANT, "u1", {})).id
    idle = (await sessions.create(TENANT, "u2", {})).id
    await handoffs.request(
        SessionWriter(held),
        TENANT,
        held,
        reason="asked",
        language="en",
        requested_by="customer",
        wait_per_position_s=60,
        notice=None,
    )
    await handoffs.claim(SessionWriter(held), TENANT, held, "agent-a", "agent")
    # Every write on one lane (`held`'s), so that they share the neighbour's batch.
    lane = SessionWriter(held)
    runs, refused = await beside_a_batchmate(
        handoffs,
        lane,
        handoffs.claim(lane, TENANT, held, "agent-b", "agent"),
        handoffs.release(lane, TENANT, held, "agent-b", "agent", override=False),
        handoffs.agent_says(lane, TENANT, held, "agent-b", "hello", {}),
        handoffs.claim(lane, TENANT, idle, "agent-b", "agent"),
        handoffs.request(
            lane,
            TENANT,
            "ses_missing",
            reason="asked",
            language="en",
            requested_by="customer",
            wait_per_position_s=60,
            notice=None,
        ),
    )
    expected = [HandoffConflict, NotHandoffAgent, HandoffConflict, HandoffNotFound]
    for answer, error in zip(refused, [*expected, SessionNotFound], strict=True):
        with pytest.raises(error):
            await answer
    assert runs == 1
    handoff = await handoffs.latest(TENANT, held)
    assert handoff is not None and handoff.claimed_by == "agent-a"
