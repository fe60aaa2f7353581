"""Steps of turns: queued, run, finished, watched. Each change is announced as `step.updated`."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from app import events
from app.storage.event_log import payloads as event_payloads
from app.storage.records import dumps, new_id
from app.storage.session_writer import NO_SESSION, SessionWriter
from app.storage.tx import Store, Tx

ActionType = Literal["call_tool", "generate_response", "ask_user", "wait_for_event", "batch"]
StepStatus = Literal["queued", "running", "succeeded", "failed", "timed_out", "stuck", "skipped"]
OPEN = ("queued", "running")
RETRYABLE = ("failed", "timed_out", "stuck")  # a turn may be resumed from a step ended so
_JSON = ("input_context", "expected_output_schema", "result", "error", "validation")


@dataclass(frozen=True)
class Step:
    id: str
    tenant_id: str
    session_id: str
    turn_id: str
    key: str
    seq: int
    parent_id: str | None
    action_type: ActionType
    name: str
    input_context: dict[str, Any]
    expected_output_schema: dict[str, Any] | None
    status: StepStatus
    attempts: int
    result: Any
    error: dict[str, Any] | None
    model: str | None
    input_tokens: int | None
    output_tokens: int | None
    tool_duration_ms: float | None
    validation: dict[str, Any] | None
    created_at: float
    started_at: float | None
    finished_at: float | None
    deadline_at: float | None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Step:
        values = {name: row[name] for name in row.keys()}
        for name in _JSON:
            if values[name] is not None:
                values[name] = json.loads(values[name])
        if isinstance(values["expected_output_schema"], str):  # a digest (see `_schema_ref`)
            values["expected_output_schema"] = {
                "$ref": _SCHEMA_REF + values["expected_output_schema"]
            }
        return cls(**values)

    def event(self) -> events.NewEvent:
        """The `step.updated` event announcing this state of the step."""
        return events.step_updated(
            self.turn_id,
            self.id,
            key=self.key,
            parent_id=self.parent_id,
            action_type=self.action_type,
            name=self.name,
            status=self.status,
            attempts=self.attempts,
            started_at=self.started_at,
            finished_at=self.finished_at,
            error=self.error,
        )


@dataclass(frozen=True)
class NewStep:
    key: str
    action_type: ActionType
    name: str
    input_context: dict[str, Any] = field(default_factory=dict)
    expected_output_schema: dict[str, Any] | None = None
    parent_id: str | None = None
    deadline_at: float | None = None
    status: StepStatus = "queued"


@dataclass(frozen=True)
class TurnRef:
    tenant_id: str
    session_id: str
    turn_id: str


def _get(tx: Tx, step_id: str) -> Step:
    row = tx.one("SELECT * FROM steps WHERE id = ?", (step_id,))
    assert row is not None
    return Step.from_row(row)


def _announce(tx: Tx, step: Step) -> Step:
    tx.emit(step.session_id, step.tenant_id, *step.event())
    return step


def _update(tx: Tx, step_id: str, *, where: str = "", **fields: Any) -> Step | None:
    """Set `fields` (and announce the step) in one statement; None when `where` (an extra
    condition on the row) does not hold."""
    values = [dumps(v) if k in _JSON and v is not None else v for k, v in fields.items()]
    assignments = ", ".join(f"{k} = ?" for k in fields)
    row = tx.one(
        f"UPDATE steps SET {assignments} WHERE id = ?{where} RETURNING *", (*values, step_id)
    )
    return None if row is None else _announce(tx, Step.from_row(row))


def _set(tx: Tx, step_id: str, **fields: Any) -> Step:
    step = _update(tx, step_id, **fields)
    assert step is not None, step_id
    return step


_NOT_ENDED_BY_WATCHDOG = " AND status NOT IN ('stuck', 'skipped', 'timed_out')"

# A step's expected output schema is stored once per distinct schema (a tool's is the same on
# every call), in `step_schemas` under its digest; the step holds the digest alone, a JSON
# string of 16 hex digits (rows written before hold `{"$ref": "step_schemas/<32 hex>"}`). A
# step read holds `{"$ref": "step_schemas/<digest>"}` either way, which reading a step for the
# API resolves. Code that only asks whether a step has a schema (the recorder) needs no lookup.
_SCHEMA_REF = "step_schemas/"
_DIGEST_HEX = 16  # 64 bits, for the few hundred schemas a deployment's tools have


def _schema_ref(tx: Tx, schema: dict[str, Any] | None) -> str | None:
    if schema is None:
        return None
    body = dumps(schema)
    digest = hashlib.sha256(body.encode()).hexdigest()[:_DIGEST_HEX]
    tx.execute(
        "INSERT INTO step_schemas (digest, body) VALUES (?, ?) ON CONFLICT (digest) DO NOTHING",
        (digest, body),
    )
    return dumps(digest)


def _referenced(step: Step) -> str | None:
    """The digest a step's schema refers to (None: the step holds its schema itself)."""
    schema = step.expected_output_schema
    ref = schema.get("$ref") if schema is not None and len(schema) == 1 else None
    return ref[len(_SCHEMA_REF) :] if isinstance(ref, str) and ref.startswith(_SCHEMA_REF) else None


# A tool step's result that the `tool.completed` event of the same transaction carries as it
# is, is stored as a reference to that event, `{"$event": <seq>}` (its session's sequence
# number), not a third copy (the event and the tool message hold the others); reading a step
# resolves it. Rows written before hold their results inline. If the event is gone (a
# retention setting that lets events go before steps is refused at start-up; erasure takes
# both), the step reads `{"$event": <seq>, "missing": ...}`.
_EVENT_REF = "$event"
EVENT_GONE = "the event holding this result is no longer stored"


def event_ref(seq: int) -> dict[str, int]:
    """What a step stores for a result held by the event `seq` of its session."""
    return {_EVENT_REF: seq}


def referenced_event(result: Any) -> int | None:
    """The sequence number of the event a stored result refers to (None: held inline)."""
    if isinstance(result, dict) and len(result) == 1:
        seq = result.get(_EVENT_REF)
        return seq if isinstance(seq, int) and not isinstance(seq, bool) else None
    return None


def held_result(seq: int, payload: dict[str, Any] | None) -> Any:
    """The result a step refers to, from the payload of its event `seq` (None: gone)."""
    if payload is None or "result" not in payload:
        return {_EVENT_REF: seq, "missing": EVENT_GONE}
    return payload["result"]


# A step re-queued under the same key keeps its id, seq and inputs, and runs again.
_UPSERT = (
    "INSERT INTO steps (id, tenant_id, session_id, turn_id, key, seq, parent_id, action_type,"
    " name, input_context, expected_output_schema, status, created_at, deadline_at, started_at,"
    " attempts) VALUES (?, ?, ?, ?, ?,"
    " (SELECT COALESCE(MAX(seq), 0) + 1 FROM steps WHERE turn_id = ?),"
    " ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (turn_id, key) DO UPDATE SET status = excluded.status, finished_at = NULL,"
    " error = NULL, deadline_at = excluded.deadline_at,"
    " attempts = steps.attempts + excluded.attempts,"
    " started_at = COALESCE(excluded.started_at, steps.started_at)"
    " RETURNING *"
)


def answer_waits(tx: Tx, session_id: str, message_id: str) -> list[Step]:
    """The user wrote again: a waiting `ask_user` step of the session has its answer."""
    rows = tx.execute(
        "UPDATE steps SET status = 'succeeded', finished_at = ?, result = ?"
        " WHERE session_id = ? AND status = 'running' AND action_type = 'ask_user' RETURNING *",
        (tx.now, dumps({"message_id": message_id}), session_id),
    ).fetchall()
    return [_announce(tx, Step.from_row(row)) for row in rows]


# -- the transitions, as functions of a transaction (a turn may carry several in one) ----------


def enqueue_steps(
    tx: Tx, turn: TurnRef, new: list[NewStep], max_depth: int
) -> tuple[list[Step], int]:
    """Queue steps (re-queue ones with the same key); refuse what would pass `max_depth`.

    Returns the queued steps and how many were refused.
    """
    (open_now,) = tx.one(
        "SELECT COUNT(*) FROM steps WHERE session_id = ?"
        " AND status IN ('queued', 'running')"
        " AND action_type NOT IN ('ask_user', 'batch')",
        (turn.session_id,),
    ) or (0,)
    room = max(0, max_depth - open_now)
    queued: list[Step] = []
    refused = 0
    for step in new:
        counts = step.action_type not in ("ask_user", "batch")
        if counts and room == 0:
            refused += 1
            continue
        room -= 1 if counts else 0
        running = step.status == "running"
        row = tx.one(
            _UPSERT,
            (
                new_id("stp"),
                turn.tenant_id,
                turn.session_id,
                turn.turn_id,
                step.key,
                turn.turn_id,
                step.parent_id,
                step.action_type,
                step.name,
                dumps(step.input_context),
                _schema_ref(tx, step.expected_output_schema),
                step.status,
                tx.now,
                step.deadline_at,
                tx.now if running else None,
                1 if running else 0,
            ),
        )
        assert row is not None
        queued.append(_announce(tx, Step.from_row(row)))
    return queued, refused


def start_step(tx: Tx, step_id: str) -> Step:
    row = tx.one(
        "UPDATE steps SET status = 'running', started_at = ?, finished_at = NULL,"
        " attempts = attempts + 1 WHERE id = ? RETURNING *",
        (tx.now, step_id),
    )
    assert row is not None, step_id
    return _announce(tx, Step.from_row(row))


def finish_step(tx: Tx, step_id: str, status: StepStatus, trace: dict[str, Any]) -> Step:
    """Record the end of a step: `trace` may carry result, error, model, input_tokens,
    output_tokens, tool_duration_ms, validation."""
    # The watchdog may have got there first (stuck, skipped, timed out): its verdict stands
    # unless the step did succeed.
    where = "" if status == "succeeded" else _NOT_ENDED_BY_WATCHDOG
    done = _update(tx, step_id, where=where, status=status, finished_at=tx.now, **trace)
    return done if done is not None else _get(tx, step_id)


def close_open_steps(
    tx: Tx, turn_id: str, status: StepStatus, error: dict[str, Any] | None = None
) -> int:
    """A turn ended abnormally: what it left queued or running will not finish."""
    rows = tx.execute(
        "SELECT id FROM steps WHERE turn_id = ? AND status IN ('queued', 'running')"
        " AND action_type != 'ask_user'",
        (turn_id,),
    ).fetchall()
    for (step_id,) in rows:
        _set(tx, step_id, status=status, finished_at=tx.now, error=error)
    return len(rows)


def fail_for_resume(tx: Tx, turn: TurnRef, number: int, error: dict[str, Any]) -> str:
    """The turn (number `number` of its session) stopped before it finished and may be
    resumed: what it left queued or running fails with `error`; the id of the step to resume
    it from (its first such step).

    A turn that stopped between steps (its model answered, the answer's write was lost) has
    none open: its next model call is the step that must run again, so that step (the key
    the resumed turn's next model call uses, `model:<tool rounds so far>`) is marked failed,
    and `POST .../steps/{id}/retry` has a step to resume from."""
    first = tx.one(
        "SELECT id FROM steps WHERE turn_id = ? AND status IN ('queued', 'running')"
        " AND action_type IN ('call_tool', 'generate_response') ORDER BY seq LIMIT 1",
        (turn.turn_id,),
    )
    close_open_steps(tx, turn.turn_id, "failed", error)
    if first is not None:
        return str(first[0])
    (rounds,) = tx.one(
        "SELECT COUNT(*) FROM messages WHERE session_id = ? AND turn_number = ?"
        " AND turn_id = ? AND role = 'assistant' AND tool_calls IS NOT NULL",
        (turn.session_id, number, turn.turn_id),
    ) or (0,)
    queued, _ = enqueue_steps(
        tx,
        turn,
        [NewStep(key=f"model:{rounds}", action_type="generate_response", name="model")],
        max_depth=1_000_000,  # a marker of what stopped, not work queued: never refused
    )
    return _set(tx, queued[0].id, status="failed", finished_at=tx.now, error=error).id


def first_retryable(tx: Tx, turn_id: str) -> str | None:
    """The turn's first step a retry may resume it from (ended failed, timed out or stuck; not
    a question to the user or a wait)."""
    row = tx.one(
        "SELECT id FROM steps WHERE turn_id = ? AND status IN"
        f" ({', '.join('?' * len(RETRYABLE))})"
        " AND action_type NOT IN ('ask_user', 'wait_for_event') ORDER BY seq LIMIT 1",
        (turn_id, *RETRYABLE),
    )
    return None if row is None else str(row[0])


class StepStore(Store):
    async def enqueue(
        self, writer: SessionWriter, turn: TurnRef, new: list[NewStep], max_depth: int
    ) -> tuple[list[Step], int]:
        return await self.transact(writer, lambda tx: enqueue_steps(tx, turn, new, max_depth))

    async def start(self, writer: SessionWriter, step_id: str) -> Step:
        return await self.transact(writer, lambda tx: start_step(tx, step_id))

    async def update(self, writer: SessionWriter, step_id: str, **fields: Any) -> Step:
        return await self.transact(writer, lambda tx: _set(tx, step_id, **fields))

    async def finish(
        self, writer: SessionWriter, step_id: str, status: StepStatus, **trace: Any
    ) -> Step:
        """Record the end of a step (see `finish_step`)."""
        return await self.transact(writer, lambda tx: finish_step(tx, step_id, status, trace))

    async def close_open(
        self,
        writer: SessionWriter,
        turn_id: str,
        status: StepStatus = "skipped",
        error: dict[str, Any] | None = None,
    ) -> int:
        """A turn ended abnormally: what it left queued or running will not finish."""
        return await self.transact(writer, lambda tx: close_open_steps(tx, turn_id, status, error))

    async def mark_stuck(
        self, started_before: float, turn_ids: list[str] | None = None
    ) -> list[Step]:
        """Steps running since before `started_before` become `stuck` (of `turn_ids` only, when
        given): one transaction over many sessions, of none of them."""
        if turn_ids == []:
            return []

        def stuck(tx: Tx) -> list[Step]:
            only = ""
            if turn_ids is not None:
                only = f" AND turn_id IN ({', '.join('?' for _ in turn_ids)})"
            rows = tx.execute(
                "SELECT id FROM steps WHERE status = 'running' AND started_at < ?"
                " AND action_type IN ('call_tool', 'generate_response', 'batch')" + only,
                (started_before, *(turn_ids or ())),
            ).fetchall()
            return [
                _set(
                    tx,
                    step_id,
                    status="stuck",
                    finished_at=tx.now,
                    error={"code": "step_stuck", "message": "the step ran for too long"},
                )
                for (step_id,) in rows
            ]

        return await self.transact(NO_SESSION, stuck)

    async def expire_waits(self, now: float) -> list[Step]:
        """`ask_user` steps whose deadline passed become `timed_out` (one transaction over many
        sessions, of none of them)."""

        def expire(tx: Tx) -> list[Step]:
            rows = tx.execute(
                "SELECT id FROM steps WHERE status = 'running' AND action_type = 'ask_user'"
                " AND deadline_at IS NOT NULL AND deadline_at < ?",
                (now,),
            ).fetchall()
            return [
                _set(tx, step_id, status="timed_out", finished_at=tx.now) for (step_id,) in rows
            ]

        return await self.transact(NO_SESSION, expire)

    async def for_session(
        self, tenant_id: str, session_id: str, turn_id: str | None = None
    ) -> list[Step]:
        sql = "SELECT * FROM steps WHERE tenant_id = ? AND session_id = ?"
        params: list[Any] = [tenant_id, session_id]
        if turn_id is not None:
            sql += " AND turn_id = ?"
            params.append(turn_id)
        rows = await self.db.fetchall(sql + " ORDER BY created_at, seq", params)
        return await self._resolved([Step.from_row(r) for r in rows])

    async def get(self, tenant_id: str, session_id: str, step_id: str) -> Step | None:
        row = await self.db.fetchone(
            "SELECT * FROM steps WHERE id = ? AND tenant_id = ? AND session_id = ?",
            (step_id, tenant_id, session_id),
        )
        return None if row is None else (await self._resolved([Step.from_row(row)]))[0]

    async def _resolved(self, found: list[Step]) -> list[Step]:
        """The steps with what they refer to in place: schemas, results held by events."""
        return await self._with_results(await self._with_schemas(found))

    async def _with_results(self, found: list[Step]) -> list[Step]:
        wanted: dict[str, set[int]] = {}
        for step in found:
            if (seq := referenced_event(step.result)) is not None:
                wanted.setdefault(step.session_id, set()).add(seq)
        if not wanted:
            return found
        held = {
            session_id: await event_payloads(self.db, session_id, seqs)
            for session_id, seqs in wanted.items()
        }
        return [
            replace(step, result=held_result(seq, held[step.session_id].get(seq)))
            if (seq := referenced_event(step.result)) is not None
            else step
            for step in found
        ]

    async def _with_schemas(self, found: list[Step]) -> list[Step]:
        """The steps with the schemas they refer to in place."""
        digests = sorted({d for step in found if (d := _referenced(step)) is not None})
        if not digests:
            return found
        rows = await self.db.fetchall(
            "SELECT digest, body FROM step_schemas WHERE digest IN"
            f" ({', '.join('?' * len(digests))})",
            digests,
        )
        bodies = {digest: json.loads(body) for digest, body in rows}
        return [
            replace(step, expected_output_schema=bodies[d])
            if (d := _referenced(step)) is not None and d in bodies
            else step
            for step in found
        ]
