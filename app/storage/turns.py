"""Turns: accepted (with idempotency and the busy policy), claimed in order, finished or failed.

Each transition is one transaction together with the events that announce it. This module
stores turns; what a claim or an interruption decides beyond a turn's own row (a human agent
holding the session, the steps and approvals a stopped turn leaves open, the session's lease)
is composed in the conversation layer (`app.conversation.claims`,
`app.conversation.interruptions`) from these operations and the other stores'.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from app import events
from app.errors import QueueFull, SessionBusy
from app.storage.event_log import SELECT_EVENTS, drop_superseded
from app.storage.messages import insert_message
from app.storage.records import Event, Message, Turn, dumps, new_id
from app.storage.session_writer import SessionWriter
from app.storage.sessions import find_session
from app.storage.tx import Refused, Store, Tx
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
class Next:
    """The session's oldest queued turn (`next_queued`), not started yet."""

    turn_id: str
    user_id: str  # the session's user
    more: bool  # another turn of the session is queued behind it


@dataclass(frozen=True)
class Claimed:
    turn: Turn
    user_id: str  # the session's user
    more: bool  # another turn of the session was queued behind this one


# -- a turn's transitions, as functions of a transaction (a claim or an interruption composes
# several, with other stores' operations, into one: app.conversation) --------------------------


def next_queued(tx: Tx, session_id: str) -> Next | None:
    """The session's oldest queued turn; None when none is queued or one of its turns runs."""
    rows = tx.execute(
        "SELECT t.id, t.status, s.user_id FROM turns t JOIN sessions s ON s.id = t.session_id"
        " WHERE t.session_id = ? AND t.status IN ('queued', 'running')"
        " ORDER BY t.status = 'running' DESC, t.number LIMIT 2",
        (session_id,),
    ).fetchall()
    if not rows or rows[0]["status"] == "running":
        return None
    return Next(str(rows[0]["id"]), str(rows[0]["user_id"]), more=len(rows) > 1)


def start(tx: Tx, next_turn: Next) -> Claimed:
    """Mark the queued turn running and announce it (`turn.started`)."""
    row = tx.one(
        "UPDATE turns SET status = 'running', started_at = ? WHERE id = ? RETURNING *",
        (tx.now, next_turn.turn_id),
    )
    assert row is not None
    turn = Turn.from_row(row)
    started = events.turn_started(turn.id, turn.user_message_id, turn.resume_from_step)
    tx.emit(turn.session_id, turn.tenant_id, *started)
    return Claimed(turn, next_turn.user_id, more=next_turn.more)


def fail_queued(tx: Tx, session_id: str, code: str, message: str) -> list[Turn]:
    """End the session's queued turns as failed with `code`, each announced."""
    rows = tx.execute(
        "UPDATE turns SET status = 'failed', error_code = ?, error_message = ?,"
        " finished_at = ? WHERE session_id = ? AND status = 'queued' RETURNING *",
        (code, message, tx.now, session_id),
    ).fetchall()
    failed = [Turn.from_row(row) for row in rows]
    for turn in failed:
        announce_failed(tx, turn, code, message)
    return failed


def running(tx: Tx, session_id: str) -> list[Turn]:
    """The session's running turns (one, unless its claims were broken)."""
    rows = tx.execute(
        "SELECT * FROM turns WHERE session_id = ? AND status = 'running'", (session_id,)
    ).fetchall()
    return [Turn.from_row(row) for row in rows]


def mark_interrupted(tx: Tx, turn: Turn, why: str) -> bool:
    """Mark a running turn failed as `interrupted`, not announced yet: the caller closes what
    the turn left open first, then `announce_failed`. False when it was not running."""
    cur = tx.execute(
        "UPDATE turns SET status = 'failed', error_code = 'interrupted',"
        " error_message = ?, finished_at = ? WHERE id = ? AND status = 'running'",
        (why, tx.now, turn.id),
    )
    return cur.rowcount > 0


def restart(tx: Tx, turn: Turn, step_id: str) -> Turn:
    """The running turn starts again from `step_id` (announced as `turn.started`)."""
    row = tx.one(
        "UPDATE turns SET resume_from_step = ? WHERE id = ? RETURNING *", (step_id, turn.id)
    )
    assert row is not None
    tx.emit(
        turn.session_id,
        turn.tenant_id,
        *events.turn_started(turn.id, turn.user_message_id, step_id),
    )
    return Turn.from_row(row)


def charge_ended(tx: Tx, turn: Turn, usage: Usage | None) -> None:
    """A turn ended without completing: its session was active now, and what its model calls
    used counts for the session and the tenant."""
    used = usage or Usage()
    tx.execute(
        f"UPDATE sessions SET last_activity_at = ?, updated_at = ?, {SESSION_USAGE} WHERE id = ?",
        (tx.now, tx.now, used.tokens, used.cost, turn.session_id),
    )
    add_tenant_usage(tx, turn.tenant_id, used)


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


def is_last(tx: Tx, turn: Turn) -> bool:
    """`turn` is its session's last turn."""
    row = tx.one("SELECT turn_count FROM sessions WHERE id = ?", (turn.session_id,))
    return row is not None and row[0] == turn.number


def reopen(tx: Tx, turn: Turn, step_id: str) -> Turn | None:
    """Queue the failed `turn` again, to resume from `step_id` (see `TurnStore.reopen`)."""
    busy = tx.one(
        "SELECT 1 FROM turns WHERE session_id = ? AND status IN ('queued', 'running')",
        (turn.session_id,),
    )
    current = find(tx, turn.id)
    if busy is not None or current is None or current.status != "failed":
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
    return find(tx, turn.id)


def announce_failed(tx: Tx, turn: Turn, code: str, message: str) -> None:
    tx.emit(turn.session_id, turn.tenant_id, *events.turn_failed(turn.id, code, message))


def find(tx: Tx, turn_id: str) -> Turn | None:
    row = tx.one("SELECT * FROM turns WHERE id = ?", (turn_id,))
    return None if row is None else Turn.from_row(row)


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
    # The sources a reply used travel with it (the stored message's metadata has them too).
    cited = (metadata or {}).get("citations")
    extra = {"citations": cited} if cited else None
    tx.emit(
        turn.session_id,
        turn.tenant_id,
        *events.message_completed(turn.id, message.id, text, extra),
    )
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
        writer: SessionWriter,
        *,
        tenant_id: str,
        session_id: str,
        content: str,
        token_estimate: int,
        client_message_id: str | None,
        policy: BusyPolicy,
        max_queued: int,
    ) -> Accepted | None:
        """Record the user's message and a queued turn; None when the session doesn't exist.
        Raises `SessionBusy` (policy `reject`) or `QueueFull` when the session refuses it."""
        turn_id = new_id("turn")

        def accept(tx: Tx) -> Accepted | Refused | None:
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
            # Refusals are answers, returned: raised, they would make the writer run this
            # job's whole batch again in savepoints (app/storage/tx.py).
            if open_turns and policy == "reject":
                return Refused(
                    SessionBusy(
                        "a turn is already running in this session; retry when it has finished",
                        session_id=session_id,
                    )
                )
            if open_turns > max_queued:
                return Refused(
                    QueueFull(
                        "too many messages are waiting in this session",
                        session_id=session_id,
                        max_queued=max_queued,
                    )
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

        return await self.transact(writer, accept)

    async def claim_next(self, writer: SessionWriter, session_id: str) -> Claimed | None:
        """Mark the oldest queued turn running (unless one already runs) and announce it.

        The turn alone: a worker claims through `app.conversation.claims`, which adds what
        else a claim decides (a human agent holding the session, a waiting question answered,
        the session's lease)."""

        def claim(tx: Tx) -> Claimed | None:
            queued = next_queued(tx, session_id)
            return None if queued is None else start(tx, queued)

        return await self.transact(writer, claim)

    async def running_claim(self, session_id: str) -> Claimed | None:
        """The session's running turn, as its claim returned it (with the session's user)."""
        row = await self.db.fetchone(
            "SELECT t.*, s.user_id AS session_user_id FROM turns t"
            " JOIN sessions s ON s.id = t.session_id"
            " WHERE t.session_id = ? AND t.status = 'running'",
            (session_id,),
        )
        if row is None:
            return None
        turn = Turn(**{name: row[name] for name in row.keys() if name != "session_user_id"})
        return Claimed(turn, str(row["session_user_id"]), more=True)

    async def complete(
        self,
        writer: SessionWriter,
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
            writer,
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
            ),
        )

    async def fail(
        self,
        writer: SessionWriter,
        turn: Turn,
        code: str,
        message: str,
        *,
        rounds: int = 0,
        usage: Usage | None = None,
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
            charge_ended(tx, turn, usage)
            announce_failed(tx, turn, code, message)

        await self.transact(writer, fail)

    async def announce_latest(self, session_id: str) -> None:
        """Publish the session's last stored event again: a follower that missed events (their
        commit's acknowledgement was lost, so they were never published) sees the gap and
        reads them from the log; one that has it drops it (it has seen that sequence)."""
        row = await self.db.fetchone(f"{SELECT_EVENTS} ORDER BY e.seq DESC LIMIT 1", (session_id,))
        if row is not None and self._publish is not None:
            self._publish([Event.from_row(row)])

    async def record_understanding(
        self, writer: SessionWriter, turn: Turn, data: dict[str, Any]
    ) -> None:
        """Store what the NLU made of the user's message on it, and announce it."""
        await self.transact(writer, lambda tx: record_understanding(tx, turn, data))

    async def add_followup(
        self,
        writer: SessionWriter,
        turn: Turn,
        text: str,
        token_estimate: int,
        metadata: dict[str, Any],
    ) -> Message | None:
        """An assistant message the service adds on its own after a turn (e.g. when a question
        to the user went unanswered); announced as `message.completed`. None, and nothing
        written, once the customer has written again: the session has a later turn (whatever
        became of it), so the follow-up would come after the conversation moved on."""

        def add(tx: Tx) -> Message | None:
            # The session's row first: a message being accepted meanwhile (elsewhere, too) holds
            # it until it commits, so the check below, a statement of its own, sees its turn.
            if find_session(tx, turn.tenant_id, turn.session_id) is None:
                return None
            later = tx.one(
                "SELECT 1 FROM turns WHERE session_id = ? AND number > ? LIMIT 1",
                (turn.session_id, turn.number),
            )
            if later is not None:
                return None
            message = turn_message(tx, turn, "assistant", text, token_estimate, metadata=metadata)
            tx.emit(
                turn.session_id,
                turn.tenant_id,
                *events.message_completed(turn.id, message.id, text, metadata),
            )
            return message

        return await self.transact(writer, add)

    async def reopen(self, writer: SessionWriter, turn: Turn, step_id: str) -> Turn | None:
        """Queue a failed turn again, to resume from `step_id`; None if the session is busy or
        the turn is no longer the failed last turn of its session."""

        return await self.transact(writer, lambda tx: reopen(tx, turn, step_id))

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

    async def queued_sessions(self) -> list[str]:
        rows = await self.db.fetchall(
            "SELECT DISTINCT session_id FROM turns WHERE status = 'queued'"
        )
        return [r[0] for r in rows]
