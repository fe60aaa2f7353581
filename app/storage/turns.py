"""Turns: accepted (with idempotency and the busy policy), claimed in order, finished or failed.

Each transition is one transaction together with the events that announce it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from app import events
from app.errors import QueueFull, SessionBusy
from app.storage import approvals, leases, steps
from app.storage.events import SELECT_EVENTS, drop_superseded
from app.storage.fence import Fence
from app.storage.messages import insert_message
from app.storage.records import Event, Message, Turn, dumps, new_id
from app.storage.sessions import find_session
from app.storage.tx import Store, Tx
from app.storage.usage import SESSION_USAGE, Usage, add_tenant_usage

BusyPolicy = Literal["reject", "enqueue"]


@dataclass(frozen=True)
class Accepted:
    turn: Turn
    created: bool  # False: the client_message_id matched an earlier turn
    ahead: int  # open turns ahead of this one when it was accepted
    resumed: bool  # the session was archived and is active again


def record_understanding(tx: Tx, turn: Turn, data: dict[str, Any]) -> None:
    """Store what the NLU made of the user's message on it, and announce it. The message keeps
    the record without its `ranking` (the runners-up, read by nobody after the turn; the
    announcement carries them): every turn's user message is stored for the longest."""
    kept = {k: v for k, v in data.items() if k != "ranking"}
    if tx.dialect == "postgres":
        sql = "UPDATE messages SET metadata = jsonb_set(metadata, '{nlu}', ?::jsonb) WHERE id = ?"
    else:
        sql = "UPDATE messages SET metadata = json_set(metadata, '$.nlu', json(?)) WHERE id = ?"
    tx.execute(sql, (dumps(kept), turn.user_message_id))
    tx.emit(
        turn.session_id,
        turn.tenant_id,
        *events.intent_classified(turn.id, turn.user_message_id, data),
    )


@dataclass(frozen=True)
class Claimed:
    turn: Turn
    user_id: str  # the session's user
    more: bool  # another turn of the session was queued behind this one


@dataclass(frozen=True)
class Owned:
    """What a session's worker found when it claimed the next turn under the session's lease."""

    claimed: Claimed | None
    fence: Fence | None  # the lease it holds now; None: another owner has it, or it let go
    interrupted: list[str]  # turns a dead owner had left running, failed as `interrupted`


INTERRUPTED = "the process running this turn stopped before it finished"
# A turn whose database went away (app/conversation/manager.py): resumed in place once the
# database answers again, or ended `interrupted` when it does not come back in time.
OUTAGE = "the database could not be reached while this turn ran"
UNREACHABLE = "the database could not be reached in time; resume the turn with its failed step"


def interrupt_running(tx: Tx, why: str, session_id: str | None = None) -> list[str]:
    """Fail the turns left running (of one session, or all) as `interrupted`, and close what
    steps they left open: nothing runs them any more. Queued turns stay queued."""
    if session_id is None:
        rows = tx.execute("SELECT * FROM turns WHERE status = 'running'").fetchall()
    else:
        rows = tx.execute(
            "SELECT * FROM turns WHERE session_id = ? AND status = 'running'", (session_id,)
        ).fetchall()
    for row in rows:
        _interrupt(tx, Turn.from_row(row), why, {"code": "interrupted", "message": why})
    return [row["id"] for row in rows]


def _interrupt(tx: Tx, turn: Turn, why: str, step_error: dict[str, Any]) -> bool:
    """End a running turn as `interrupted`, resumable: its open steps (or, between steps, its
    next model call) fail with `step_error`, so `POST .../steps/{id}/retry` and a replay of
    its `client_message_id` can resume it. False when it was not running."""
    cur = tx.execute(
        "UPDATE turns SET status = 'failed', error_code = 'interrupted',"
        " error_message = ?, finished_at = ? WHERE id = ? AND status = 'running'",
        (why, tx.now, turn.id),
    )
    if cur.rowcount == 0:
        return False
    steps.fail_for_resume(tx, _ref(turn), turn.number, step_error)
    approvals.expire_pending_of_turn(tx, turn.id, why)
    _announce_failure(tx, turn, "interrupted", why)
    return True


def _charge_ended(tx: Tx, turn: Turn, usage: Usage | None) -> None:
    """A turn ended without completing: its session was active now, and what its model calls
    used counts for the session and the tenant."""
    used = usage or Usage()
    tx.execute(
        f"UPDATE sessions SET last_activity_at = ?, updated_at = ?, {SESSION_USAGE} WHERE id = ?",
        (tx.now, tx.now, used.tokens, used.cost, turn.session_id),
    )
    add_tenant_usage(tx, turn.tenant_id, used)


def _ref(turn: Turn) -> steps.TurnRef:
    return steps.TurnRef(turn.tenant_id, turn.session_id, turn.id)


def _outage_step_error() -> dict[str, Any]:
    return {"code": "database_unavailable", "message": OUTAGE}


def _claim(tx: Tx, session_id: str, answer_waits: bool) -> Claimed | None:
    rows = tx.execute(
        "SELECT t.id, t.status, s.user_id, EXISTS (SELECT 1 FROM handoffs h"
        " WHERE h.session_id = t.session_id AND h.status = 'claimed') AS held"
        " FROM turns t JOIN sessions s ON s.id = t.session_id"
        " WHERE t.session_id = ? AND t.status IN ('queued', 'running')"
        " ORDER BY t.status = 'running' DESC, t.number LIMIT 2",
        (session_id,),
    ).fetchall()
    if not rows or rows[0]["status"] == "running":
        return None
    if rows[0]["held"]:
        _hold_queued(tx, session_id)
        return None
    row = tx.one(
        "UPDATE turns SET status = 'running', started_at = ? WHERE id = ? RETURNING *",
        (tx.now, rows[0]["id"]),
    )
    assert row is not None
    turn = Turn.from_row(row)
    started = events.turn_started(turn.id, turn.user_message_id, turn.resume_from_step)
    tx.emit(session_id, turn.tenant_id, *started)
    if answer_waits and not turn.resume_from_step:
        steps.answer_waits(tx, session_id, turn.user_message_id)
    return Claimed(turn, str(rows[0]["user_id"]), more=len(rows) > 1)


def _hold_queued(tx: Tx, session_id: str) -> None:
    """A human agent took the session over: turns queued before the claim get no bot reply."""
    rows = tx.execute(
        "UPDATE turns SET status = 'failed', error_code = 'handed_off', error_message = ?,"
        " finished_at = ? WHERE session_id = ? AND status = 'queued' RETURNING *",
        (HANDED_OFF, tx.now, session_id),
    ).fetchall()
    for row in rows:
        _announce_failure(tx, Turn.from_row(row), "handed_off", HANDED_OFF)


HANDED_OFF = "a human agent has taken over this conversation; the bot does not answer"


def turn_message(
    tx: Tx, turn: Turn, role: str, content: str | None, token_estimate: int, **extra: Any
) -> Message:
    return insert_message(
        tx,
        session_id=turn.session_id,
        tenant_id=turn.tenant_id,
        turn_id=turn.id,
        turn_number=turn.number,
        role=role,
        content=content,
        token_estimate=token_estimate,
        **extra,
    )


def _reopen(tx: Tx, turn: Turn, step_id: str) -> Turn | None:
    """Queue the failed `turn` again, to resume from `step_id` (see `TurnStore.reopen`)."""
    busy = tx.one(
        "SELECT 1 FROM turns WHERE session_id = ? AND status IN ('queued', 'running')",
        (turn.session_id,),
    )
    current = _turn(tx, turn.id)
    if busy is not None or current.status != "failed":
        return None
    (last_seq,) = tx.one(
        "SELECT last_event_seq FROM sessions WHERE id = ?", (turn.session_id,)
    ) or (0,)
    tx.execute(
        "UPDATE turns SET status = 'queued', error_code = NULL, error_message = NULL,"
        " finished_at = NULL, resume_from_step = ?, accepted_seq = ?,"
        " cancel_requested_at = NULL WHERE id = ?",
        (step_id, last_seq, turn.id),
    )
    tx.execute(
        "UPDATE sessions SET status = 'active', archived_at = NULL, last_activity_at = ?"
        " WHERE id = ?",
        (tx.now, turn.session_id),
    )
    return _turn(tx, turn.id)


def _announce_failure(tx: Tx, turn: Turn, code: str, message: str) -> None:
    tx.emit(turn.session_id, turn.tenant_id, *events.turn_failed(turn.id, code, message))


def _turn(tx: Tx, turn_id: str) -> Turn:
    row = tx.one("SELECT * FROM turns WHERE id = ?", (turn_id,))
    assert row is not None
    return Turn.from_row(row)


def complete_turn(
    tx: Tx,
    turn: Turn,
    *,
    text: str,
    token_estimate: int,
    model: str | None,
    rounds: int,
    prompt_tokens: int,
    completion_tokens: int,
    metadata: dict[str, Any] | None = None,
    snapshot: Callable[[Tx], object] | None = None,
    usage: Usage | None = None,
) -> Message:
    """Store the final assistant message and close the turn.

    `snapshot`, when given, is called with the transaction to update the session snapshot
    atomically with the turn's end; `usage` (what the turn's model calls used) is added to the
    session's and the tenant's counts in it too.
    """
    message = turn_message(tx, turn, "assistant", text, token_estimate, metadata=metadata)
    tx.execute(
        "UPDATE turns SET status = 'completed', assistant_message_id = ?, model = ?,"
        " rounds = ?, prompt_tokens = ?, completion_tokens = ?, finished_at = ?"
        " WHERE id = ?",
        (message.id, model, rounds, prompt_tokens, completion_tokens, tx.now, turn.id),
    )
    used = usage or Usage()
    tx.execute(
        f"UPDATE sessions SET last_activity_at = ?, updated_at = ?, {SESSION_USAGE} WHERE id = ?",
        (tx.now, tx.now, used.tokens, used.cost, turn.session_id),
    )
    add_tenant_usage(tx, turn.tenant_id, used)
    if snapshot is not None:
        snapshot(tx)
    tx.emit(turn.session_id, turn.tenant_id, *events.message_completed(turn.id, message.id, text))
    drop_superseded(tx, turn)
    tx.emit(
        turn.session_id,
        turn.tenant_id,
        *events.turn_completed(
            turn.id,
            message.id,
            model=model,
            rounds=rounds,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
        ),
    )
    return message


class TurnStore(Store):
    async def accept(
        self,
        *,
        tenant_id: str,
        session_id: str,
        content: str,
        token_estimate: int,
        client_message_id: str | None,
        policy: BusyPolicy,
        max_queued: int,
    ) -> Accepted | None:
        """Record the user's message and a queued turn; None when the session doesn't exist."""
        turn_id = new_id("turn")

        def accept(tx: Tx) -> Accepted | None:
            session = find_session(tx, tenant_id, session_id)
            if session is None:
                return None
            if client_message_id is not None:
                row = tx.one(
                    "SELECT * FROM turns WHERE session_id = ? AND client_message_id = ?",
                    (session_id, client_message_id),
                )
                if row is not None:
                    return Accepted(Turn.from_row(row), created=False, ahead=0, resumed=False)
            (open_turns,) = tx.one(
                "SELECT COUNT(*) FROM turns WHERE session_id = ?"
                " AND status IN ('queued', 'running')",
                (session_id,),
            ) or (0,)
            if open_turns and policy == "reject":
                raise SessionBusy(
                    "a turn is already running in this session; retry when it has finished",
                    session_id=session_id,
                )
            if open_turns > max_queued:
                raise QueueFull(
                    "too many messages are waiting in this session",
                    session_id=session_id,
                    max_queued=max_queued,
                )
            resumed = session.status == "archived"
            if resumed:
                tx.execute(
                    "UPDATE sessions SET status = 'active', archived_at = NULL WHERE id = ?",
                    (session_id,),
                )
                tx.emit(session_id, tenant_id, *events.session_resumed(session_id))
            message = insert_message(
                tx,
                session_id=session_id,
                tenant_id=tenant_id,
                turn_id=turn_id,
                turn_number=session.turn_count + 1,
                role="user",
                content=content,
                token_estimate=token_estimate,
                metadata={"client_message_id": client_message_id} if client_message_id else {},
            )
            # The session row is locked: its sequence moved only by what this job emitted.
            last_seq = session.last_event_seq + (1 if resumed else 0)
            row = tx.one(
                "INSERT INTO turns (id, session_id, tenant_id, number, client_message_id,"
                " user_message_id, status, accepted_seq, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, 'queued', ?, ?) RETURNING *",
                (
                    turn_id,
                    session_id,
                    tenant_id,
                    session.turn_count + 1,
                    client_message_id,
                    message.id,
                    last_seq,
                    tx.now,
                ),
            )
            tx.execute(
                "UPDATE sessions SET turn_count = turn_count + 1, last_activity_at = ?,"
                " updated_at = ? WHERE id = ?",
                (tx.now, tx.now, session_id),
            )
            if open_turns:
                tx.emit(session_id, tenant_id, *events.turn_queued(turn_id, open_turns))
            assert row is not None
            turn = Turn.from_row(row)
            return Accepted(turn, created=True, ahead=open_turns, resumed=resumed)

        return await self.transact(accept)

    async def claim_next(self, session_id: str, *, answer_waits: bool = False) -> Claimed | None:
        """Mark the oldest queued turn running (unless one already runs) and announce it.

        With `answer_waits`, a new message (not a resumed turn) also answers the session's
        waiting `ask_user` step, in the same transaction."""
        return await self.transact(lambda tx: _claim(tx, session_id, answer_waits))

    async def claim_owned(
        self,
        session_id: str,
        *,
        owner: str,
        ttl_s: float,
        fence: Fence | None,
        answer_waits: bool = False,
    ) -> Owned:
        """`claim_next` under the session's lease, in one transaction: take (or keep) the
        lease; on taking it (`fence` None: this worker held nothing yet), fail the turns a dead
        owner left running; claim the next queued turn; with none left, let the lease go.

        Releasing in the transaction that saw no queued turn closes the race with a message
        accepted elsewhere meanwhile: either this claim sees it, or the lease is free (the
        claim's first statement holds the lease row until it commits) for the accepting
        process to take."""

        def claim(tx: Tx) -> Owned:
            token = leases.acquire(tx, session_id, owner, ttl_s)
            if token is None:
                return Owned(None, None, [])
            held = Fence(session_id, owner, token)
            interrupted = interrupt_running(tx, INTERRUPTED, session_id) if fence is None else []
            claimed = _claim(tx, session_id, answer_waits)
            if claimed is None:
                leases.release(tx, held)
                return Owned(None, None, interrupted)
            return Owned(claimed, held, interrupted)

        return await self.transact(claim)

    async def claimed_running(
        self, session_id: str, owner: str | None
    ) -> tuple[Claimed, int | None] | None:
        """After a claim whose commit lost its acknowledgement: the turn it claimed, if it was
        stored (the session's running turn, under `owner`'s lease when leases are used), with
        the lease's token. Nothing of that turn ran yet: its worker runs it from the start."""
        row = await self.db.fetchone(
            "SELECT * FROM turns WHERE session_id = ? AND status = 'running'", (session_id,)
        )
        held = await self.db.fetchone(
            "SELECT s.user_id, l.owner, l.token FROM sessions s"
            " LEFT JOIN session_leases l ON l.session_id = s.id WHERE s.id = ?",
            (session_id,),
        )
        if row is None or held is None or (owner is not None and held["owner"] != owner):
            return None
        claimed = Claimed(Turn.from_row(row), str(held["user_id"]), more=True)
        return claimed, None if owner is None else int(held["token"])

    async def complete(
        self,
        turn: Turn,
        *,
        text: str,
        token_estimate: int,
        model: str | None,
        rounds: int,
        prompt_tokens: int,
        completion_tokens: int,
        metadata: dict[str, Any] | None = None,
        snapshot: Any = None,
    ) -> Message:
        """Store the final assistant message and close the turn, in one transaction (see
        `complete_turn`)."""
        return await self.transact(
            lambda tx: complete_turn(
                tx,
                turn,
                text=text,
                token_estimate=token_estimate,
                model=model,
                rounds=rounds,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                metadata=metadata,
                snapshot=snapshot,
            )
        )

    async def append_message(
        self,
        turn: Turn,
        *,
        role: str,
        content: str | None,
        token_estimate: int,
        tool_calls: list[dict[str, Any]] | None = None,
        tool_call_id: str | None = None,
        name: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Message:
        """Record an intermediate message of a running turn (tool calls and their results)."""
        return await self.transact(
            lambda tx: turn_message(
                tx,
                turn,
                role,
                content,
                token_estimate,
                tool_calls=tool_calls,
                tool_call_id=tool_call_id,
                name=name,
                metadata=metadata,
            )
        )

    async def fail(
        self, turn: Turn, code: str, message: str, *, rounds: int = 0, usage: Usage | None = None
    ) -> None:
        """End the turn as failed; what its model calls used still counts (`usage`)."""

        def fail(tx: Tx) -> None:
            cur = tx.execute(
                "UPDATE turns SET status = 'failed', error_code = ?, error_message = ?,"
                " rounds = ?, finished_at = ? WHERE id = ? AND status IN ('queued', 'running')",
                (code, message, rounds, tx.now, turn.id),
            )
            if cur.rowcount == 0:
                return  # already finished (or the session was deleted)
            _charge_ended(tx, turn, usage)
            _announce_failure(tx, turn, code, message)

        await self.transact(fail)

    async def resume_after_outage(self, turn: Turn) -> Turn | None:
        """The turn's database connection broke and the database answers again: the turn as
        the database has it, ready to run again from what it stored (`resume_from_step` set,
        its open steps failed, `turn.started` announcing the resumption); or, when its end is
        stored already (the commit whose acknowledgement was lost) or someone else ended it,
        the turn as it ended. None when it is gone (its session was deleted)."""

        def resume(tx: Tx) -> Turn | None:
            row = tx.one("SELECT * FROM turns WHERE id = ?", (turn.id,))
            if row is None or row["status"] != "running":
                return None if row is None else Turn.from_row(row)
            step_id = steps.fail_for_resume(tx, _ref(turn), turn.number, _outage_step_error())
            approvals.expire_pending_of_turn(tx, turn.id, OUTAGE)
            resumed = tx.one(
                "UPDATE turns SET resume_from_step = ? WHERE id = ? RETURNING *",
                (step_id, turn.id),
            )
            assert resumed is not None
            tx.emit(
                turn.session_id,
                turn.tenant_id,
                *events.turn_started(turn.id, turn.user_message_id, step_id),
            )
            return Turn.from_row(resumed)

        return await self.transact(resume)

    async def interrupt(
        self, turn: Turn, why: str = UNREACHABLE, *, usage: Usage | None = None
    ) -> None:
        """End a running turn `interrupted`, resumable from its failed step: its database did
        not come back within the turn's time (the default `why`), or the service shuts down
        under it. What its model calls used still counts."""
        step_error = (
            _outage_step_error() if why == UNREACHABLE else {"code": "interrupted", "message": why}
        )

        def interrupt(tx: Tx) -> None:
            if _interrupt(tx, turn, why, step_error):
                _charge_ended(tx, turn, usage)

        await self.transact(interrupt)

    async def reopen_interrupted(self, turn: Turn) -> Turn | None:
        """A replay of an interrupted turn's message (its `client_message_id`): queue the turn
        again from its first failed step, as `POST .../steps/{id}/retry` would, when it is
        still its session's last turn and nothing else runs there. The turn as it is then
        (queued again, already resumed by someone else, or still failed: not resumable);
        None when it is gone."""

        def reopen(tx: Tx) -> Turn | None:
            row = tx.one("SELECT * FROM turns WHERE id = ?", (turn.id,))
            if row is None:
                return None
            current = Turn.from_row(row)
            if current.status != "failed" or current.error_code != "interrupted":
                return current
            last = tx.one("SELECT turn_count FROM sessions WHERE id = ?", (turn.session_id,))
            step = tx.one(
                "SELECT id FROM steps WHERE turn_id = ? AND status IN"
                f" ({', '.join('?' * len(steps.RETRYABLE))})"
                " AND action_type NOT IN ('ask_user', 'wait_for_event') ORDER BY seq LIMIT 1",
                (turn.id, *steps.RETRYABLE),
            )
            if last is None or last[0] != current.number or step is None:
                return current
            return _reopen(tx, current, str(step[0])) or current

        return await self.transact(reopen)

    async def announce_latest(self, session_id: str) -> None:
        """Publish the session's last stored event again: a follower that missed events (their
        commit's acknowledgement was lost, so they were never published) sees the gap and
        reads them from the log; one that has it drops it (it has seen that sequence)."""
        row = await self.db.fetchone(f"{SELECT_EVENTS} ORDER BY e.seq DESC LIMIT 1", (session_id,))
        if row is not None and self._publish is not None:
            self._publish([Event.from_row(row)])

    async def fail_interrupted(self) -> list[str]:
        """At start-up: turns a previous process left running can't be finished; say so.

        Queued turns never started, so they stay queued and run when the service is back.
        """
        why = "the service restarted before this turn finished"
        return await self.transact(lambda tx: interrupt_running(tx, why))

    async def record_understanding(self, turn: Turn, data: dict[str, Any]) -> None:
        """Store what the NLU made of the user's message on it, and announce it."""
        await self.transact(lambda tx: record_understanding(tx, turn, data))

    async def add_followup(
        self, turn: Turn, text: str, token_estimate: int, metadata: dict[str, Any]
    ) -> Message:
        """An assistant message the service adds on its own after a turn (e.g. when a question
        to the user went unanswered); announced as `message.completed`."""

        def add(tx: Tx) -> Message:
            message = turn_message(tx, turn, "assistant", text, token_estimate, metadata=metadata)
            tx.emit(
                turn.session_id,
                turn.tenant_id,
                *events.message_completed(turn.id, message.id, text, metadata),
            )
            return message

        return await self.transact(add)

    async def reopen(self, turn: Turn, step_id: str) -> Turn | None:
        """Queue a failed turn again, to resume from `step_id`; None if the session is busy or
        the turn is no longer the failed last turn of its session."""

        return await self.transact(lambda tx: _reopen(tx, turn, step_id))

    async def by_client_message_id(
        self, tenant_id: str, session_id: str, client_message_id: str
    ) -> Turn | None:
        row = await self.db.fetchone(
            "SELECT * FROM turns WHERE session_id = ? AND tenant_id = ? AND client_message_id = ?",
            (session_id, tenant_id, client_message_id),
        )
        return None if row is None else Turn.from_row(row)

    async def latest(self, session_id: str) -> Turn | None:
        row = await self.db.fetchone(
            "SELECT * FROM turns WHERE session_id = ? ORDER BY number DESC LIMIT 1", (session_id,)
        )
        return None if row is None else Turn.from_row(row)

    async def get(self, session_id: str, turn_id: str) -> Turn | None:
        row = await self.db.fetchone(
            "SELECT * FROM turns WHERE id = ? AND session_id = ?", (turn_id, session_id)
        )
        return None if row is None else Turn.from_row(row)

    async def open_sessions(self) -> list[str]:
        """Sessions with a turn queued or running."""
        rows = await self.db.fetchall(
            "SELECT DISTINCT session_id FROM turns WHERE status IN ('queued', 'running')"
        )
        return [r[0] for r in rows]

    async def queued_sessions(self) -> list[str]:
        rows = await self.db.fetchall(
            "SELECT DISTINCT session_id FROM turns WHERE status = 'queued'"
        )
        return [r[0] for r in rows]
