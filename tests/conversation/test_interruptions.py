"""What an interruption closes (app/conversation/interruptions.py) on both engines, each in one
commit: the turn's open steps fail (the first is the one to resume from), its pending approvals
expire, then its end is announced; after an outage the turn runs again from that step; a replay
of an interrupted last turn's message queues it again from its first failed step."""

from __future__ import annotations

from typing import Any

import pytest

from app.conversation import interruptions
from app.conversation.interruptions import SHUT_DOWN, UNREACHABLE, Interruptions
from app.storage.session_writer import SessionWriter
from tests.conversation.test_claims import commits, running_with_open_work
from tests.storage.test_leases import TENANT, World


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def world(open_db: Any) -> World:
    return World(await open_db("interruptions.db"))


@pytest.mark.parametrize(
    ("end", "why", "step_code"),
    [("shut_down", SHUT_DOWN, "interrupted"), ("unreachable", UNREACHABLE, "database_unavailable")],
)
async def test_an_interrupted_turn_closes_what_it_left_open_and_is_announced_last(
    world: World, end: str, why: str, step_code: str
) -> None:
    turn, step_id, approval_id = await running_with_open_work(world)

    await getattr(Interruptions(world.turns), end)(SessionWriter(turn.session_id), turn)

    ended = await world.turns.get(turn.session_id, turn.id)
    assert ended is not None
    assert (ended.status, ended.error_code, ended.error_message) == ("failed", "interrupted", why)
    step = await world.steps.get(TENANT, turn.session_id, step_id)
    assert step is not None and step.status == "failed"
    assert step.error is not None and step.error["code"] == step_code
    approval = await world.approvals.get(approval_id)
    assert approval is not None and approval.status == "expired"
    assert commits(world) == [
        [("step.updated", "failed"), ("approval.resolved", "expired"), ("turn.failed", None)]
    ]

    await Interruptions(world.turns).shut_down(
        SessionWriter(turn.session_id), turn
    )  # ended already: nothing more
    assert len(world.commits) == 1


async def test_after_an_outage_the_turn_runs_again_from_its_failed_step(world: World) -> None:
    turn, step_id, approval_id = await running_with_open_work(world)

    found = await Interruptions(world.turns).resume_after_outage(
        SessionWriter(turn.session_id), turn
    )

    assert found is not None
    assert (found.status, found.resume_from_step) == ("running", step_id)
    approval = await world.approvals.get(approval_id)
    assert approval is not None and approval.status == "expired"
    assert commits(world) == [
        [("step.updated", "failed"), ("approval.resolved", "expired"), ("turn.started", None)]
    ]
    started = world.commits[0][-1]
    assert started.data["resumed_from_step"] == step_id


async def test_after_an_outage_a_turn_that_ended_meanwhile_is_read_back_as_it_ended(
    world: World,
) -> None:
    turn, _, _ = await running_with_open_work(world)
    await world.turns.fail(SessionWriter(turn.session_id), turn, "turn_timeout", "too slow")
    world.commits.clear()

    found = await Interruptions(world.turns).resume_after_outage(
        SessionWriter(turn.session_id), turn
    )

    assert found is not None and (found.status, found.error_code) == ("failed", "turn_timeout")
    assert world.commits == []


async def test_a_replayed_message_reopens_an_interrupted_last_turn_from_its_failed_step(
    world: World,
) -> None:
    turn, step_id, _ = await running_with_open_work(world)
    await Interruptions(world.turns).shut_down(SessionWriter(turn.session_id), turn)

    reopened = await world.turns.transact(
        SessionWriter(turn.session_id), lambda tx: interruptions.reopen(tx, turn)
    )

    assert reopened is not None
    assert (reopened.status, reopened.resume_from_step) == ("queued", step_id)
    # Reopened already: a second replay finds it queued and leaves it so.
    again = await world.turns.transact(
        SessionWriter(turn.session_id), lambda tx: interruptions.reopen(tx, turn)
    )
    assert again is not None and again.status == "queued"


async def test_a_replay_leaves_an_interrupted_turn_failed_once_a_later_turn_exists(
    world: World,
) -> None:
    turn, _, _ = await running_with_open_work(world)
    await Interruptions(world.turns).shut_down(SessionWriter(turn.session_id), turn)
    later = await world.queue(turn.session_id, "something else")

    found = await world.turns.transact(
        SessionWriter(turn.session_id), lambda tx: interruptions.reopen(tx, turn)
    )

    assert found is not None and (found.status, found.error_code) == ("failed", "interrupted")
    assert await world.status(turn.session_id, later) == ("queued", None)
