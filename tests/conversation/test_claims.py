"""The rules of a claim (app/conversation/claims.py) on both engines, each claim one commit: a
human agent holding the session fails the turns queued before the claim (`handed_off`) and starts
none; a claimed new message answers the waiting question; a takeover closes what the dead owner
left open and starts the next turn, under the new owner's lease, in one commit."""

from __future__ import annotations

import time
from typing import Any

import pytest

from app.conversation.claims import HANDED_OFF
from app.storage.records import Turn
from app.storage.session_writer import SessionWriter
from app.storage.steps import NewStep, TurnRef
from tests.storage.test_leases import TENANT, A, B, World, expire, waiting_for_approval


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def take_over(world: World, session_id: str) -> None:
    """A human agent claims the session."""
    await world.handoffs.request(
        SessionWriter(session_id),
        TENANT,
        session_id,
        reason="asked",
        language="en",
        requested_by="customer",
        wait_per_position_s=60,
        notice=None,
    )
    await world.handoffs.claim(SessionWriter(session_id), TENANT, session_id, "agent-ana", "agent")


async def waiting_question(world: World, session_id: str, turn_id: str) -> str:
    """The turn asked the customer something: a running `ask_user` step."""
    [step], _ = await world.steps.enqueue(
        SessionWriter(TurnRef(TENANT, session_id, turn_id).session_id),
        TurnRef(TENANT, session_id, turn_id),
        [NewStep("ask:1", "ask_user", "ask_user", status="running")],
        max_depth=50,
    )
    return step.id


def commits(world: World) -> list[list[tuple[str, str | None]]]:
    """(type, status) of each event published, one list per commit."""
    return [[(e.type, e.data.get("status")) for e in batch] for batch in world.commits]


async def running_with_open_work(world: World) -> tuple[Turn, str, str]:
    """A turn running under A's lease with a tool step running and an approval pending:
    (turn, step, approval)."""
    session_id, turn_id, approval_id = await waiting_for_approval(world, A)
    [step], _ = await world.steps.enqueue(
        SessionWriter(TurnRef(TENANT, session_id, turn_id).session_id),
        TurnRef(TENANT, session_id, turn_id),
        [NewStep("tool:c1", "call_tool", "send_email", status="running")],
        max_depth=50,
    )
    turn = await world.turns.get(session_id, turn_id)
    assert turn is not None
    world.commits.clear()
    return turn, step.id, approval_id


@pytest.fixture
async def world(open_db: Any) -> World:
    return World(await open_db("claims.db"))


async def test_while_an_agent_holds_the_session_no_turn_starts_and_queued_ones_fail(
    world: World,
) -> None:
    session_id = await world.session()
    first, second = await world.queue(session_id, "one"), await world.queue(session_id, "two")
    await take_over(world, session_id)
    world.commits.clear()

    assert await world.claims.next(SessionWriter(session_id)) is None

    for turn_id in (first, second):
        turn = await world.turns.get(session_id, turn_id)
        assert turn is not None
        assert (turn.status, turn.error_code, turn.error_message) == (
            "failed",
            "handed_off",
            HANDED_OFF,
        )
    assert commits(world) == [[("turn.failed", None), ("turn.failed", None)]]

    await world.handoffs.release(
        SessionWriter(session_id), TENANT, session_id, "agent-ana", "agent", override=False
    )
    after = await world.queue(session_id, "back to the bot")
    claimed = await world.claims.next(SessionWriter(session_id))
    assert claimed is not None and claimed.turn.id == after


async def test_an_agent_holding_the_session_lets_a_running_turn_finish(world: World) -> None:
    session_id = await world.session()
    await world.queue(session_id, "one")
    running = await world.claims.next(SessionWriter(session_id))
    assert running is not None
    queued = await world.queue(session_id, "two")
    await take_over(world, session_id)

    assert (
        await world.claims.next(SessionWriter(session_id)) is None
    )  # one turn runs: nothing decided yet
    assert await world.status(session_id, queued) == ("queued", None)

    await world.turns.fail(SessionWriter(running.turn.session_id), running.turn, "x", "done")
    assert await world.claims.next(SessionWriter(session_id)) is None
    assert await world.status(session_id, queued) == ("failed", "handed_off")


async def test_a_claimed_new_message_answers_the_waiting_question_in_the_same_commit(
    world: World,
) -> None:
    session_id = await world.session()
    asking = await world.queue(session_id, "refund my order")
    claimed = await world.claims.next(SessionWriter(session_id))
    assert claimed is not None
    step_id = await waiting_question(world, session_id, asking)
    await world.turns.fail(
        SessionWriter(claimed.turn.session_id), claimed.turn, "x", "ended waiting for the answer"
    )
    answer = await world.queue(session_id, "order 42")
    world.commits.clear()

    claimed = await world.claims.next(SessionWriter(session_id))

    assert claimed is not None and claimed.turn.id == answer
    assert commits(world) == [[("turn.started", None), ("step.updated", "succeeded")]]
    step = await world.steps.get(TENANT, session_id, step_id)
    assert step is not None
    assert (step.status, step.result) == ("succeeded", {"message_id": claimed.turn.user_message_id})


async def test_a_takeover_closes_what_the_dead_owner_left_and_starts_the_next_turn_at_once(
    world: World,
) -> None:
    turn, _, _ = await running_with_open_work(world)
    session_id, stranded = turn.session_id, turn.id
    waiting = await world.queue(session_id, "two")
    await expire(world, session_id)  # A stopped renewing
    world.commits.clear()

    taken = await world.claims.owned(SessionWriter(session_id), owner=B, ttl_s=30)

    assert taken.interrupted == [stranded]
    assert taken.claimed is not None and taken.claimed.turn.id == waiting
    assert taken.fence is not None and (taken.fence.owner, taken.fence.token) == (B, 2)
    assert await world.status(session_id, stranded) == ("failed", "interrupted")
    # One commit, in the order a follower must read it: the step failed (the one to resume
    # from), its approval expired, the turn's end, then the next turn's start.
    assert commits(world) == [
        [
            ("step.updated", "failed"),
            ("approval.resolved", "expired"),
            ("turn.failed", None),
            ("turn.started", None),
        ]
    ]
    holder = await world.leases.holder(session_id)
    assert holder is not None and holder[:2] == (B, 2) and holder[2] > time.time()


async def test_a_claim_that_finds_nothing_lets_the_lease_go_in_the_same_commit(
    world: World,
) -> None:
    session_id = await world.session()
    only = await world.queue(session_id)
    owned = await world.claims.owned(SessionWriter(session_id), owner=A, ttl_s=30)
    assert owned.claimed is not None and owned.fence is not None
    await world.turns.fail(
        SessionWriter(owned.claimed.turn.session_id), owned.claimed.turn, "x", "done"
    )

    done = await world.claims.owned(SessionWriter(session_id, owned.fence), owner=A, ttl_s=30)

    assert (done.claimed, done.fence, done.interrupted) == (None, None, [])
    assert await world.status(session_id, only) == ("failed", "x")
    holder = await world.leases.holder(session_id)
    assert holder is not None and holder[2] == 0  # released, not expired
