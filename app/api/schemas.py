"""Wire schemas of the REST API. Times are ISO 8601 in UTC."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from app.storage.approvals import Approval
from app.storage.audit import AuditEntry
from app.storage.records import Message, Session, Turn, dumps
from app.storage.steps import Step
from app.text.labels import clean_label, clean_labels

_ID = r"^[A-Za-z0-9_.:@+-]+$"
MAX_METADATA_BYTES = 16 * 1024


def _metadata_size(value: dict[str, Any]) -> dict[str, Any]:
    value = clean_labels(value)  # shown in listings: nothing invisible or control in it
    # Measured as stored (compact JSON, UTF-8): metadata is copied into every session read.
    size = len(dumps(value).encode())
    if size > MAX_METADATA_BYTES:
        raise ValueError(
            f"metadata is {size} bytes as JSON; at most {MAX_METADATA_BYTES} bytes (16 KiB) "
            "are allowed"
        )
    return value


Metadata = Annotated[dict[str, Any], AfterValidator(_metadata_size)]
# Text people read in listings (names, reasons): cleaned of controls and invisible characters.
Label = Annotated[str, AfterValidator(clean_label)]


def iso(ts: float | None) -> str | None:
    return (
        None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")
    )


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(BaseModel):
    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class ErrorResponse(BaseModel):
    error: ErrorBody


class CreateSession(Strict):
    user_id: str = Field(min_length=1, max_length=128, pattern=_ID)
    metadata: Metadata = Field(default_factory=dict)


class SessionOut(BaseModel):
    id: str
    user_id: str
    status: Literal["active", "archived"]
    metadata: dict[str, Any]
    turn_count: int
    last_event_seq: int
    created_at: str
    updated_at: str
    last_activity_at: str
    archived_at: str | None

    @classmethod
    def of(cls, s: Session) -> SessionOut:
        return cls(
            id=s.id,
            user_id=s.user_id,
            status=s.status,
            metadata=s.metadata,
            turn_count=s.turn_count,
            last_event_seq=s.last_event_seq,
            created_at=iso(s.created_at) or "",
            updated_at=iso(s.updated_at) or "",
            last_activity_at=iso(s.last_activity_at) or "",
            archived_at=iso(s.archived_at),
        )


class SessionList(BaseModel):
    items: list[SessionOut]
    next_cursor: str | None


class PostMessage(Strict):
    content: str = Field(min_length=1, max_length=32_000)
    client_message_id: str | None = Field(None, min_length=1, max_length=128, pattern=_ID)
    # "agent": the human agent holding the session writes to its customer (no turn runs).
    author: Literal["customer", "agent"] = "customer"
    suggestion_id: str | None = Field(None, min_length=1, max_length=128, pattern=_ID)


class MessageOut(BaseModel):
    id: str
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None
    turn_id: str | None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: str

    @classmethod
    def of(cls, m: Message) -> MessageOut:
        return cls(
            id=m.id,
            role=m.role,
            content=m.content,
            turn_id=m.turn_id,
            tool_calls=m.tool_calls,
            tool_call_id=m.tool_call_id,
            name=m.name,
            metadata=m.metadata,
            created_at=iso(m.created_at) or "",
        )


class MessageList(BaseModel):
    items: list[MessageOut]
    next_cursor: str | None


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int


class TurnOut(BaseModel):
    turn_id: str
    session_id: str
    status: Literal["queued", "running", "completed", "failed"]
    user_message_id: str
    message: MessageOut | None
    model: str | None
    rounds: int
    usage: Usage

    @classmethod
    def of(cls, t: Turn, message: Message | None) -> TurnOut:
        return cls(
            turn_id=t.id,
            session_id=t.session_id,
            status=t.status,
            user_message_id=t.user_message_id,
            message=None if message is None else MessageOut.of(message),
            model=t.model,
            rounds=t.rounds,
            usage=Usage(prompt_tokens=t.prompt_tokens, completion_tokens=t.completion_tokens),
        )


class CancelledOut(BaseModel):
    turn_id: str
    session_id: str
    status: Literal["queued", "running", "completed", "failed"]
    code: str | None  # `cancelled` for the turn this request ended

    @classmethod
    def of(cls, t: Turn) -> CancelledOut:
        return cls(turn_id=t.id, session_id=t.session_id, status=t.status, code=t.error_code)


class Health(BaseModel):
    # ok: every check "ok"; degraded (200): serving without a dependency it can do without
    # (Redis); failing (503): a dependency it cannot run without fails (the database).
    status: Literal["ok", "degraded", "failing"]
    version: str
    uptime_s: float
    checks: dict[str, str]


# Tool approvals (routes/approvals.py)


class SensitiveFieldOut(BaseModel):
    field: str
    kinds: list[str]
    note: str


class ToolApprovalOut(BaseModel):
    id: str
    session_id: str
    turn_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any] = Field(description="masked, as everyone may see them")
    arguments_full: dict[str, Any] | None = Field(
        None,
        exclude_if=lambda value: value is None,
        description="unmasked, as the tool will run; only for operators and admins (audited)",
    )
    sensitive: list[SensitiveFieldOut] = Field(
        description="per field, the kinds of sensitive value the masks hide"
    )
    reason: str
    status: Literal["pending", "approved", "rejected", "expired"]
    decided_by: str | None
    decision_reason: str | None
    created_at: str
    expires_at: str
    decided_at: str | None

    @classmethod
    def of(cls, a: Approval, *, full: bool = False) -> ToolApprovalOut:
        return cls(
            id=a.id,
            session_id=a.session_id,
            turn_id=a.turn_id,
            call_id=a.call_id,
            tool=a.tool,
            arguments=a.arguments,
            arguments_full=a.arguments_full if full else None,
            sensitive=[SensitiveFieldOut.model_validate(item) for item in a.sensitive],
            reason=a.reason,
            status=a.status,
            decided_by=a.decided_by,
            decision_reason=a.decision_reason,
            created_at=iso(a.created_at) or "",
            expires_at=iso(a.expires_at) or "",
            decided_at=iso(a.decided_at),
        )


class ToolApprovalList(BaseModel):
    items: list[ToolApprovalOut]


class ApprovalDecisionIn(Strict):
    decision: Literal["approve", "reject"]
    reason: Label | None = Field(None, max_length=500)


# Steps (routes/steps.py)


class StepOut(BaseModel):
    id: str
    turn_id: str
    key: str
    seq: int
    parent_id: str | None
    action_type: str
    name: str
    status: str
    attempts: int
    input_context: dict[str, Any]
    expected_output_schema: dict[str, Any] | None
    result: Any
    error: dict[str, Any] | None
    trace: dict[str, Any]

    @classmethod
    def of(cls, s: Step) -> StepOut:
        duration = (
            None
            if s.started_at is None or s.finished_at is None
            else round((s.finished_at - s.started_at) * 1000, 3)
        )
        return cls(
            id=s.id,
            turn_id=s.turn_id,
            key=s.key,
            seq=s.seq,
            parent_id=s.parent_id,
            action_type=s.action_type,
            name=s.name,
            status=s.status,
            attempts=s.attempts,
            input_context=s.input_context,
            expected_output_schema=s.expected_output_schema,
            result=s.result,
            error=s.error,
            trace={
                "created_at": iso(s.created_at),
                "started_at": iso(s.started_at),
                "finished_at": iso(s.finished_at),
                "duration_ms": duration,
                "deadline_at": iso(s.deadline_at),
                "model": s.model,
                "input_tokens": s.input_tokens,
                "output_tokens": s.output_tokens,
                "tool_duration_ms": s.tool_duration_ms,
                "validation": s.validation,
            },
        )


class StepList(BaseModel):
    items: list[StepOut]


class RetryOut(BaseModel):
    turn_id: str
    status: str
    resumed_from_step: str


class AuditEntryOut(BaseModel):
    id: int = Field(description="Increasing: pass the last one as `after` for the next page")
    actor: str = Field(description="A key's subject, `model`, or `session:<id>` (the customer)")
    role: str
    action: str = Field(description="e.g. approval.decided, tool.succeeded, memory.forgotten")
    target_id: str | None
    session_id: str | None
    at: str
    details: dict[str, Any] = Field(description="Ids, names, kinds and outcomes; no content")

    @classmethod
    def of(cls, e: AuditEntry) -> AuditEntryOut:
        return cls(
            id=e.id,
            actor=e.actor,
            role=e.role,
            action=e.action,
            target_id=e.target_id,
            session_id=e.session_id,
            at=iso(e.at) or "",
            details=e.details,
        )


class AuditList(BaseModel):
    items: list[AuditEntryOut]
    next_after: int | None = Field(description="`after` for the next page; null on the last")
