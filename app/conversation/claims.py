"""Which turn of a session runs next, and under whose lease: the rules of a claim.

A claim is one transaction, composed here from the stores' operations:

- a session runs one turn at a time, the oldest queued first (`turns.next_queued`);
- while a human agent holds the session, no bot turn starts: the turns queued before the agent
  claimed it fail as `handed_off` (what the customer writes afterwards is stored for the agent,
  never queued: `HandoffStore.store_for_agent`);
- a new message (not a resumed turn) answers the session's waiting `ask_user` step;
- each claim is written with the worker's `SessionWriter` (app/storage/session_writer.py): on the
  session's lane, under the lease the worker holds (if any);
- with leases (several processes on one database), the claim first takes or keeps the session's
  lease (on PostgreSQL its row lock orders the session's claims); on taking it, what a dead owner
  left running ends `interrupted` (`app.conversation.interruptions`); finding nothing to run,
  it lets the lease go in the same transaction. That closes the race with a message accepted
  elsewhere meanwhile: either this claim sees the message, or the lease is free for the
  accepting process to take.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.conversation.interruptions import interrupt_running
from app.storage import handoffs, leases, steps, turns
from app.storage.fence import Fence
from app.storage.leases import LeaseStore
from app.storage.session_writer import SessionWriter
from app.storage.turns import Claimed, TurnStore
from app.storage.tx import Tx

HANDED_OFF = "a human agent has taken over this conversation; the bot does not answer"


@dataclass(frozen=True)
class Owned:
    """What a session's worker found when it claimed the next turn under the session's lease."""

    claimed: Claimed | None
    fence: Fence | None  # the lease it holds now; None: another owner has it, or it let go
    interrupted: list[str]  # turns a dead owner had left running, failed as `interrupted`


def claim(tx: Tx, session_id: str) -> Claimed | None:
    """Start the session's next turn, unless one runs or a human agent holds the session."""
    queued = turns.next_queued(tx, session_id)
    if queued is None:
        return None
    if handoffs.claimed_by_agent(tx, session_id):
        turns.fail_queued(tx, session_id, "handed_off", HANDED_OFF)
        return None
    claimed = turns.start(tx, queued)
    if not claimed.turn.resume_from_step:
        steps.answer_waits(tx, session_id, claimed.turn.user_message_id)
    return claimed


def claim_owned(tx: Tx, session_id: str, *, owner: str, ttl_s: float, fence: Fence | None) -> Owned:
    """`claim` under the session's lease (module docstring). `fence` is the lease the worker
    holds already (None: it holds nothing yet, so taking the lease is a takeover)."""
    token = leases.acquire(tx, session_id, owner, ttl_s)  # first: the lease row's lock
    if token is None:
        return Owned(None, None, [])
    held = Fence(session_id, owner, token)
    interrupted = interrupt_running(tx, session_id) if fence is None else []
    claimed = claim(tx, session_id)
    if claimed is None:
        leases.release(tx, held)
        return Owned(None, None, interrupted)
    return Owned(claimed, held, interrupted)


class Claims:
    """A session worker's claims, each one transaction of `turns`' database. `leases` is the
    lease store, when claims are made under leases."""

    def __init__(self, turns: TurnStore, leases: LeaseStore | None = None) -> None:
        self.turns = turns
        self.leases = leases

    async def next(self, writer: SessionWriter) -> Claimed | None:
        """Claim the next turn of `writer`'s session (one process: no lease)."""
        session_id = writer.session_id
        return await self.turns.transact(writer, lambda tx: claim(tx, session_id))

    async def owned(self, writer: SessionWriter, *, owner: str, ttl_s: float) -> Owned:
        """Claim the next turn of `writer`'s session under its lease (`claim_owned`): the lease
        `writer` is fenced by is the one its worker holds already (none: taking it is a
        takeover), and the claim runs under it."""
        session_id = writer.session_id
        return await self.turns.transact(
            writer,
            lambda tx: claim_owned(tx, session_id, owner=owner, ttl_s=ttl_s, fence=writer.fence),
        )

    async def adopt(self, session_id: str, owner: str | None) -> tuple[Claimed, int | None] | None:
        """After a claim whose commit lost its acknowledgement: the turn it claimed, if it was
        stored (the session's running turn, under `owner`'s lease when leases are used), with
        the lease's token. Nothing of that turn ran yet: its worker runs it from the start."""
        claimed = await self.turns.running_claim(session_id)
        if claimed is None or owner is None:
            return None if claimed is None else (claimed, None)
        assert self.leases is not None, "claims under a lease need the lease store"
        holder = await self.leases.holder(session_id)
        if holder is None or holder[0] != owner:
            return None
        return claimed, holder[1]
