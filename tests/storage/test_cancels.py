"""Cancel requests on a real database (SQLite and PostgreSQL): recorded on the session's running
turn with the lease holder named, found only by that holder, and bound to the one turn: a
takeover that ends it as `interrupted`, a later turn, a reopened turn never see it."""

from __future__ import annotations

from typing import Any

import pytest

from app.storage.cancels import CancelStore
from app.storage.records import Turn
from app.storage.session_writer import SessionWriter
from tests.storage.test_leases import A, B, World, expire


@pytest.fixture
async def world(open_db: Any) -> World:
    return World(await open_db("cancels.db"))


async def test_a_request_names_the_running_turn_and_its_owner_and_only_the_owner_finds_it(
    world: World,
) -> None:
    cancels = CancelStore(world.turns.db)
    session_id = await world.session()
    assert (
        await cancels.request(SessionWriter(session_id), session_id) is None
    )  # nothing runs: nothing recorded
    queued = await world.queue(session_id)
    assert (
        await cancels.request(SessionWriter(session_id), session_id) is None
    )  # queued is not running
    await world.claims.owned(SessionWriter(session_id), owner=A, ttl_s=30)
    session = await world.sessions.find("default", session_id)
    assert session is not None
    announced = len(world.published)

    request = await cancels.request(SessionWriter(session_id), session_id)

    assert request is not None
    assert (request.turn.id, request.owner) == (queued, A)
    assert request.after_seq == session.last_event_seq
    first = request.turn.cancel_requested_at
    assert first is not None
    assert len(world.published) == announced  # nothing announced: the owner ends the turn
    assert await cancels.pending(A) == [(session_id, queued)]
    assert await cancels.pending(B) == []
    again = await cancels.request(
        SessionWriter(session_id), session_id
    )  # asked twice: the first time stays
    assert again is not None and again.turn.cancel_requested_at == first


async def test_an_ended_turn_takes_its_request_with_it(world: World) -> None:
    cancels = CancelStore(world.turns.db)
    session_id = await world.session()
    turn_id = await world.queue(session_id)
    owned = await world.claims.owned(SessionWriter(session_id), owner=A, ttl_s=30)
    assert owned.claimed is not None and owned.claimed.turn.id == turn_id
    assert await cancels.request(SessionWriter(session_id), session_id) is not None
    await world.turns.fail(
        SessionWriter(owned.claimed.turn.session_id), owned.claimed.turn, "llm_unavailable", "down"
    )  # ended otherwise
    assert await cancels.pending(A) == []
    assert await cancels.request(SessionWriter(session_id), session_id) is None


async def test_a_takeover_ends_the_turn_as_interrupted_and_no_later_turn_is_cancelled(
    world: World,
) -> None:
    cancels = CancelStore(world.turns.db)
    session_id = await world.session()
    first = await world.queue(session_id)
    await world.claims.owned(SessionWriter(session_id), owner=A, ttl_s=30)
    assert await cancels.request(SessionWriter(session_id), session_id) is not None
    await expire(world, session_id)  # A died with the request pending

    taken = await world.claims.owned(SessionWriter(session_id), owner=B, ttl_s=30)

    assert taken.interrupted == [first]
    assert await world.status(session_id, first) == ("failed", "interrupted")
    assert await cancels.pending(A) == [] and await cancels.pending(B) == []

    # Reopened to resume from a step (same turn id), the turn runs without the old request.
    stale = await world.turns.get(session_id, first)
    assert stale is not None and stale.cancel_requested_at is not None
    reopened = await world.turns.reopen(SessionWriter(stale.session_id), stale, "stp_1")
    assert reopened is not None and reopened.cancel_requested_at is None
    resumed = await world.claims.owned(SessionWriter(session_id), owner=B, ttl_s=30)
    assert _claimed(resumed.claimed).id == first
    assert await cancels.pending(B) == []

    # A later turn of the session starts clean too.
    await world.turns.fail(
        SessionWriter(_claimed(resumed.claimed).session_id),
        _claimed(resumed.claimed),
        "llm_unavailable",
        "down",
    )
    later = await world.queue(session_id, "again")
    claimed = await world.claims.owned(SessionWriter(session_id), owner=B, ttl_s=30)
    assert _claimed(claimed.claimed).id == later
    assert await cancels.pending(B) == []


def _claimed(claimed: Any) -> Turn:
    assert claimed is not None
    turn: Turn = claimed.turn
    assert turn.status == "running" and turn.cancel_requested_at is None
    return turn
