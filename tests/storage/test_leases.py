"""Session leases on a real database (SQLite and PostgreSQL): acquire, renew, expiry and
takeover, the fencing token (one more at each change of owner, never back), the stale owner's
writes refused, and the claim that takes, keeps and lets go of a session's lease."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import time
from typing import Any

import pytest

from app.conversation.claims import Claims
from app.storage.approvals import ApprovalStore
from app.storage.event_log import SESSION_KEY, EventStore
from app.storage.fence import Fence, LeaseLost
from app.storage.handoffs import HandoffStore
from app.storage.leases import LeaseStore, dead_local_owner, new_owner
from app.storage.port import Database
from app.storage.records import Event
from app.storage.session_writer import SessionWriter
from app.storage.sessions import SessionStore
from app.storage.steps import StepStore
from app.storage.turns import TurnStore
from app.storage.tx import Tx

TENANT = "default"
A, B = "host-a:1:aaaa", "host-b:2:bbbb"


class World:
    def __init__(self, db: Database) -> None:
        self.published: list[Event] = []
        self.commits: list[list[Event]] = []  # what was published, one list per commit
        self.leases = LeaseStore(db, self._publish)
        self.sessions = SessionStore(db, self._publish)
        self.turns = TurnStore(db, self._publish)
        self.events = EventStore(db, self._publish)
        self.approvals = ApprovalStore(db, self._publish)
        self.steps = StepStore(db, self._publish)
        self.handoffs = HandoffStore(db, self._publish)
        # A worker's claims (app.conversation.claims).
        self.claims = Claims(self.turns, self.leases)

    def _publish(self, events: list[Event]) -> None:
        self.published.extend(events)
        self.commits.append(list(events))

    async def session(self) -> str:
        return (await self.sessions.create(TENANT, "u1", {})).id

    async def queue(self, session_id: str, content: str = "hello") -> str:
        accepted = await self.turns.accept(
            SessionWriter(session_id),
            tenant_id=TENANT,
            session_id=session_id,
            content=content,
            token_estimate=1,
            client_message_id=None,
            policy="enqueue",
            max_queued=10,
        )
        assert accepted is not None
        return accepted.turn.id

    async def status(self, session_id: str, turn_id: str) -> tuple[str, str | None]:
        turn = await self.turns.get(session_id, turn_id)
        assert turn is not None
        return turn.status, turn.error_code


@pytest.fixture
async def world(open_db: Any) -> World:
    return World(await open_db("leases.db"))


async def expire(world: World, session_id: str) -> None:
    """Make the session's lease run out now (as if its owner stopped renewing it)."""
    await world.leases.transact(
        SessionWriter(session_id),
        lambda tx: tx.execute(
            "UPDATE session_leases SET expires_at = ? WHERE session_id = ?",
            (tx.now - 1, session_id),
        ),
    )


async def test_the_first_owner_gets_token_1_and_a_live_lease_keeps_others_out(
    world: World,
) -> None:
    session_id = await world.session()
    assert await world.leases.acquire(session_id, A, 30) == 1
    assert await world.leases.acquire(session_id, B, 30) is None
    # The owner itself may take it again (same tenure, same token), pushing the expiry on.
    before = await world.leases.holder(session_id)
    assert await world.leases.acquire(session_id, A, 60) == 1
    after = await world.leases.holder(session_id)
    assert before is not None and after is not None
    assert after[:2] == (A, 1) and after[2] > before[2]


async def test_an_expired_lease_is_taken_over_with_the_next_token(world: World) -> None:
    session_id = await world.session()
    assert await world.leases.acquire(session_id, A, 30) == 1
    await expire(world, session_id)
    assert await world.leases.acquire(session_id, B, 30) == 2
    await expire(world, session_id)
    assert await world.leases.acquire(session_id, A, 30) == 3
    assert await world.leases.holder(session_id) == (A, 3, pytest.approx(time.time() + 30, abs=5))


async def test_a_released_lease_is_free_and_its_token_never_goes_back(world: World) -> None:
    session_id = await world.session()
    token = await world.leases.acquire(session_id, A, 30)
    assert token == 1
    await world.leases.release(Fence(session_id, A, token))
    assert await world.leases.acquire(session_id, B, 30) == 2
    # A release under a stale fence changes nothing.
    await world.leases.release(Fence(session_id, A, 1))
    assert await world.leases.acquire(session_id, A, 30) is None


async def test_an_owner_that_takes_its_released_lease_again_gets_a_new_token(
    world: World,
) -> None:
    """A renewal that ran while the lease was let go reports it lost under the old token; the
    worker that took it again meanwhile must not be the one that stops (it was, ~1 turn in 250
    on two processes: 'taken over' by nobody, the turn interrupted 15 s later)."""
    session_id = await world.session()
    assert await world.leases.acquire(session_id, A, 30) == 1
    await world.leases.release(Fence(session_id, A, 1))
    assert await world.leases.renew(A, {session_id: 1}, 30) == {session_id: 1}
    assert await world.leases.acquire(session_id, A, 30) == 2  # a new tenure
    await expire(world, session_id)
    assert await world.leases.acquire(session_id, A, 30) == 3  # so is one after expiry
    assert await world.leases.renew(A, {session_id: 3}, 30) == {}


async def test_no_lease_for_a_session_that_does_not_exist(world: World) -> None:
    assert await world.leases.acquire("sess_missing", A, 30) is None


async def test_renew_keeps_what_is_held_and_reports_what_was_lost(world: World) -> None:
    kept, lost, released = [await world.session() for _ in range(3)]
    for session_id in (kept, lost, released):
        assert await world.leases.acquire(session_id, A, 30) == 1
    await expire(world, lost)
    assert await world.leases.acquire(lost, B, 30) == 2
    await world.leases.release(Fence(released, A, 1))

    gone = await world.leases.renew(A, {kept: 1, lost: 1, released: 1}, 120)

    assert gone == {lost: 1, released: 1}
    holder = await world.leases.holder(kept)
    assert holder is not None and holder[2] > time.time() + 60
    # Renewing did not bring the released lease back.
    assert await world.leases.acquire(released, B, 30) == 2


async def test_a_stale_owners_writes_are_refused_and_write_nothing(world: World) -> None:
    session_id = await world.session()
    turn_id = await world.queue(session_id)
    owned = await world.claims.owned(SessionWriter(session_id), owner=A, ttl_s=30)
    assert owned.claimed is not None and owned.fence == Fence(session_id, A, 1)
    stale = owned.fence
    await expire(world, session_id)
    taken = await world.claims.owned(SessionWriter(session_id), owner=B, ttl_s=30)
    # B took over: A's running turn was interrupted, and B holds the lease with token 2.
    assert taken.interrupted == [turn_id] and taken.fence is None
    assert await world.status(session_id, turn_id) == ("failed", "interrupted")
    events_before = len(await world.events.after(session_id, 0))

    with pytest.raises(LeaseLost):  # written with what A's worker holds: its stale lease
        await world.turns.fail(
            SessionWriter(session_id, stale),
            owned.claimed.turn,
            "cancelled",
            "A thinks it still runs this",
        )
    assert await world.status(session_id, turn_id) == ("failed", "interrupted")
    assert len(await world.events.after(session_id, 0)) == events_before


async def test_the_same_write_with_no_fence_is_not_refused(world: World) -> None:
    """The handle decides: a request's write (the session's lane, no lease) is not checked
    against the lease a stale owner's identical write is refused under."""
    session_id = await world.session()
    await world.queue(session_id)
    owned = await world.claims.owned(SessionWriter(session_id), owner=A, ttl_s=30)
    assert owned.fence is not None
    stale = owned.fence
    await expire(world, session_id)
    assert (await world.claims.owned(SessionWriter(session_id), owner=B, ttl_s=30)).fence is None

    def note(tx: Tx) -> Event:
        return tx.emit(session_id, TENANT, "x.noted", {"by": "a request"})

    with pytest.raises(LeaseLost):
        await world.events.transact(SessionWriter(session_id, stale), note)
    await world.events.transact(SessionWriter(session_id), note)
    rows = await world.events.db.fetchall(
        f"SELECT data FROM events WHERE session_key = {SESSION_KEY} AND type = 'x.noted'",
        (session_id,),
    )
    assert [json.loads(r[0]) for r in rows] == [{"by": "a request"}]  # once: the request's


async def test_the_current_owner_writes_under_its_fence(world: World) -> None:
    session_id = await world.session()
    turn_id = await world.queue(session_id)
    owned = await world.claims.owned(SessionWriter(session_id), owner=A, ttl_s=30)
    assert owned.claimed is not None and owned.fence is not None
    held = owned.fence

    await world.turns.fail(
        SessionWriter(session_id, held),
        owned.claimed.turn,
        "cancelled",
        "stopped by its owner",
    )
    assert await world.status(session_id, turn_id) == ("failed", "cancelled")


async def test_jobs_of_one_owner_committed_together_check_its_lease_once(
    world: World, backend: str
) -> None:
    session_id = await world.session()
    await world.queue(session_id)
    owned = await world.claims.owned(SessionWriter(session_id), owner=A, ttl_s=30)
    assert owned.fence is not None
    held, db = owned.fence, world.events.db

    def note(n: int) -> Any:
        return lambda tx: tx.emit(session_id, TENANT, "x.noted", {"n": n})

    owner = SessionWriter(session_id, held)
    before = db.counts()
    await asyncio.gather(*(world.events.transact_nowait(owner, note(n)) for n in range(40)))
    cost = db.counts() - before
    assert cost.jobs == 40 and cost.commits < 40  # committed in batches
    # Each job emits one event: one statement on PostgreSQL (two on SQLite), plus the lease
    # check, once per transaction on PostgreSQL (SQLite checks every job: it's in-process).
    per_job = 1 if backend == "postgres" else 2
    checks = cost.commits if backend == "postgres" else cost.jobs
    assert cost.writes == 40 * per_job + checks


async def test_a_stale_owners_job_fails_alone_in_a_batch_with_the_owners(world: World) -> None:
    session_id = await world.session()
    await world.queue(session_id)
    owned = await world.claims.owned(SessionWriter(session_id), owner=A, ttl_s=30)
    assert owned.fence is not None
    stale = Fence(session_id, B, owned.fence.token)  # never held it

    def note(n: int) -> Any:
        return lambda tx: tx.emit(session_id, TENANT, "x.noted", {"n": n})

    owner, impostor = (
        SessionWriter(owned.fence.session_id, owned.fence),
        SessionWriter(stale.session_id, stale),
    )
    futures = [world.events.transact_nowait(owner, note(n)) for n in range(10)]
    lost = world.events.transact_nowait(impostor, note(99))
    futures += [world.events.transact_nowait(owner, note(n)) for n in range(10, 20)]
    await asyncio.gather(*futures)
    with pytest.raises(LeaseLost):
        await lost
    rows = await world.events.db.fetchall(
        f"SELECT data FROM events WHERE session_key = {SESSION_KEY} AND type = 'x.noted'"
        " ORDER BY seq",
        (session_id,),
    )
    assert [json.loads(r[0])["n"] for r in rows] == list(range(20))


async def test_a_claim_keeps_the_lease_while_turns_are_queued_and_lets_go_after(
    world: World,
) -> None:
    session_id = await world.session()
    first, second = await world.queue(session_id, "one"), await world.queue(session_id, "two")

    owned = await world.claims.owned(SessionWriter(session_id), owner=A, ttl_s=30)
    assert owned.claimed is not None and owned.claimed.turn.id == first and owned.claimed.more
    # Another process finds the session owned: it claims nothing and the turn stays queued.
    other = await world.claims.owned(SessionWriter(session_id), owner=B, ttl_s=30)
    assert (other.claimed, other.fence, other.interrupted) == (None, None, [])
    assert await world.status(session_id, second) == ("queued", None)

    await world.turns.transact(
        SessionWriter(session_id),
        lambda tx: tx.execute("UPDATE turns SET status = 'completed' WHERE id = ?", (first,)),
    )
    owned = await world.claims.owned(SessionWriter(session_id, owned.fence), owner=A, ttl_s=30)
    assert owned.claimed is not None and owned.claimed.turn.id == second
    assert not owned.interrupted  # the same tenure: nothing of its own is interrupted
    await world.turns.transact(
        SessionWriter(session_id),
        lambda tx: tx.execute("UPDATE turns SET status = 'completed' WHERE id = ?", (second,)),
    )
    done = await world.claims.owned(SessionWriter(session_id, owned.fence), owner=A, ttl_s=30)
    assert (done.claimed, done.fence) == (None, None)
    # Let go: the next message may run anywhere, under a new token.
    third = await world.queue(session_id, "three")
    elsewhere = await world.claims.owned(SessionWriter(session_id), owner=B, ttl_s=30)
    assert elsewhere.claimed is not None and elsewhere.claimed.turn.id == third
    assert elsewhere.fence == Fence(session_id, B, 2)


async def test_sessions_with_open_turns_and_no_live_owner_are_unowned(world: World) -> None:
    idle, fresh, owned, expired = [await world.session() for _ in range(4)]
    for session_id in (fresh, owned, expired):
        await world.queue(session_id)
    await world.leases.acquire(owned, A, 30)
    await world.leases.acquire(expired, A, 30)
    await expire(world, expired)

    assert sorted(await world.leases.unowned(time.time())) == sorted([fresh, expired])
    assert idle not in await world.leases.unowned(time.time())
    # Turns queued moments ago are left to the process that accepted them.
    assert await world.leases.unowned(time.time(), fresh_s=60) == []


async def test_a_lease_of_a_process_of_this_host_that_is_gone_is_freed(world: World) -> None:
    session_id = await world.session()
    await world.queue(session_id)
    gone = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await gone.wait()
    dead = f"{socket.gethostname()}:{gone.pid}:dead"
    assert dead_local_owner(dead)
    assert not dead_local_owner(new_owner())  # this process
    assert not dead_local_owner(f"{socket.gethostname()}:{os.getppid()}:live")
    assert not dead_local_owner(f"elsewhere:{gone.pid}:x")  # another host's pid means nothing
    assert await world.leases.acquire(session_id, dead, 30) == 1
    assert await world.leases.unowned(time.time()) == []

    assert await world.leases.expire_dead_local(time.time()) == [dead]

    assert await world.leases.unowned(time.time()) == [session_id]
    assert await world.leases.acquire(session_id, A, 30) == 2


async def test_deleting_a_session_deletes_its_lease(world: World) -> None:
    session_id = await world.session()
    await world.leases.acquire(session_id, A, 30)
    assert await world.sessions.delete(SessionWriter(session_id), TENANT, session_id)
    assert await world.leases.holder(session_id) is None


async def waiting_for_approval(world: World, owner: str) -> tuple[str, str, str]:
    """A session whose turn, claimed by `owner`, waits for an approval: (session, turn, id)."""
    session_id = await world.session()
    turn_id = await world.queue(session_id)
    owned = await world.claims.owned(SessionWriter(session_id), owner=owner, ttl_s=30)
    assert owned.claimed is not None
    approval = await world.approvals.create(
        SessionWriter(session_id),
        tenant_id=TENANT,
        session_id=session_id,
        turn_id=turn_id,
        call_id="call_1",
        tool="send_email",
        arguments={},
        reason="external",
        timeout_s=300,
    )
    return session_id, turn_id, approval.id


async def test_start_up_expires_only_the_approvals_nobody_alive_waits_for(world: World) -> None:
    _, _, live = await waiting_for_approval(world, A)
    dead_session, _, dead = await waiting_for_approval(world, B)
    await expire(world, dead_session)

    assert await world.approvals.expire_all_pending(time.time()) == 1

    left, gone = await world.approvals.get(live), await world.approvals.get(dead)
    assert left is not None and left.status == "pending"
    assert gone is not None and gone.status == "expired"


async def test_a_takeover_expires_the_interrupted_turns_approvals(world: World) -> None:
    session_id, turn_id, approval_id = await waiting_for_approval(world, A)
    await expire(world, session_id)

    taken = await world.claims.owned(SessionWriter(session_id), owner=B, ttl_s=30)

    assert taken.interrupted == [turn_id]
    approval = await world.approvals.get(approval_id)
    assert approval is not None and approval.status == "expired"
