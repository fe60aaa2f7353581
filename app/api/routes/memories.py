"""A user's memories: list, operator-entered facts, delete, forget, history.

The caller's tenant comes from the principal and the user from the path; a memory id of
another user or tenant answers 404 `memory_not_found`, exactly like a missing one.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response, status
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic.config import JsonDict

from app.api.auth import require_role
from app.api.deps import MemoryDep, PrincipalDep
from app.api.params import Instant, MemoryId, UserId
from app.api.schemas import ErrorResponse, iso
from app.errors import UserNotFound
from app.memory.queries import ListFilter
from app.memory.records import HistoryEntry, MemoryItem, Scope
from app.memory.service import MemoryService
from app.principal import Principal
from app.text.labels import clean_label

router = APIRouter(prefix="/v1/users/{user_id}/memories", tags=["memories"])

_KEY = r"^[A-Za-z][A-Za-z0-9_.:-]*$"
DEFAULT_REASON = "operator_request"
# Why a memory was deleted or forgotten, as the history shows it: cleaned like every label, and
# never empty (a reason of invisible characters only is the default one).
Reason = Annotated[str, AfterValidator(lambda text: clean_label(text) or DEFAULT_REASON)]
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "No such memory for this user"}
}


class MemoryOut(BaseModel):
    id: str
    tier: Literal["fact", "node"]
    key: str
    value: str
    entity: str | None
    fact_type: str
    status: Literal["active", "pending", "archived", "rejected"]
    source: str
    # customer_text: free text from a conversation (untrusted when recalled into a turn);
    # structured: a closed-vocabulary or pattern-shaped value; operator: entered by an operator
    origin: Literal["customer_text", "structured", "operator"]
    confidence: float
    effective_confidence: float  # after decay, now
    source_session_id: str | None
    valid_until: str | None
    created_at: str
    updated_at: str
    last_confirmed_at: str
    last_accessed_at: str | None

    @classmethod
    def of(cls, item: MemoryItem, service: MemoryService) -> MemoryOut:
        return cls(
            id=item.id,
            tier=item.tier,
            key=item.key,
            value=item.value,
            entity=item.entity,
            fact_type=item.fact_type,
            status=item.status,
            source=item.source,
            origin=item.origin,
            confidence=round(item.confidence, 4),
            effective_confidence=round(service.effective_confidence(item), 4),
            source_session_id=item.source_session_id,
            valid_until=iso(item.valid_until),
            created_at=iso(item.created_at) or "",
            updated_at=iso(item.updated_at) or "",
            last_confirmed_at=iso(item.last_confirmed_at) or "",
            last_accessed_at=iso(item.last_accessed_at),
        )


class MemoryList(BaseModel):
    items: list[MemoryOut]


class Upserted(MemoryOut):
    action: str  # created, updated or confirmed


class CreateMemory(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1, max_length=128, pattern=_KEY)
    value: str = Field(min_length=1, max_length=2000)
    tier: Literal["fact", "node"] = "fact"
    # Strict: a JSON number, not `true` or "0.5" (which pydantic would otherwise take).
    confidence: float = Field(1.0, ge=0, le=1, strict=True)
    # With its zone (RFC 3339). One already past is allowed: the schema cannot say "future",
    # and the fact is simply expired (kept, listed, never recalled, archived by the sweeper).
    valid_until: Instant | None = None


# Exactly one of `query` and `key`, as a string (null is the same as absent): said in the
# schema too, so a client (or a fuzzer) knows `{}` and both together are refused.
_ONE_OF_QUERY_OR_KEY: JsonDict = {
    "oneOf": [
        {"required": [name], "properties": {name: {"type": "string"}}} for name in ("query", "key")
    ]
}


class ForgetRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_ONE_OF_QUERY_OR_KEY)

    # At least one character that is not white space: a blank query would match everything.
    query: str | None = Field(None, min_length=1, max_length=200, pattern=r"\S")
    key: str | None = Field(None, min_length=1, max_length=128, pattern=_KEY)
    reason: Reason = Field(DEFAULT_REASON, min_length=1, max_length=200)

    @model_validator(mode="after")
    def _one_of(self) -> ForgetRequest:
        if (self.query is None) == (self.key is None):
            raise ValueError("give exactly one of query or key")
        return self


class Forgotten(BaseModel):
    deleted: list[str]


class HistoryOut(BaseModel):
    action: str
    old_value: str | None
    new_value: str | None
    old_status: str | None
    new_status: str | None
    confidence: float | None
    source: str | None
    actor: str | None
    session_id: str | None
    reason: str | None
    at: str

    @classmethod
    def of(cls, entry: HistoryEntry) -> HistoryOut:
        fields = {name: getattr(entry, name) for name in cls.model_fields if name != "at"}
        return cls(**fields, at=iso(entry.at) or "")


class HistoryList(BaseModel):
    items: list[HistoryOut]


def _scope(principal: Principal, user_id: str) -> Scope:
    if not principal.may_see_user(user_id):  # a key bound to another user: as if none
        raise UserNotFound("no such user", user_id=user_id)
    return Scope(principal.tenant_id, user_id)


@router.get("", response_model=MemoryList)
async def list_memories(
    user_id: UserId,
    principal: PrincipalDep,
    memory: MemoryDep,
    tier: Annotated[Literal["fact", "node"] | None, Query()] = None,
    status: Annotated[Literal["active", "pending", "archived", "rejected"] | None, Query()] = None,
    key: Annotated[str | None, Query(max_length=128)] = None,
    text: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> MemoryList:
    filters = ListFilter(tier=tier, status=status, key=key, text=text, limit=limit)
    items = await memory.list_memories(_scope(principal, user_id), filters)
    return MemoryList(items=[MemoryOut.of(item, memory) for item in items])


@router.post("", response_model=Upserted, responses={201: {"model": Upserted}})
async def upsert_memory(
    user_id: UserId,
    body: CreateMemory,
    principal: PrincipalDep,
    memory: MemoryDep,
    response: Response,
) -> Upserted:
    require_role(principal, "operator")
    written = await memory.upsert(
        _scope(principal, user_id),
        body.key,
        body.value,
        tier=body.tier,
        confidence=body.confidence,
        valid_until=body.valid_until.timestamp() if body.valid_until else None,
        actor=principal.subject,
        role=principal.role,
    )
    response.status_code = status.HTTP_201_CREATED if written.action == "created" else 200
    out = MemoryOut.of(written.item, memory)
    return Upserted(**out.model_dump(), action=written.action)


@router.delete("/{memory_id}", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND)
async def delete_memory(
    user_id: UserId,
    memory_id: MemoryId,
    principal: PrincipalDep,
    memory: MemoryDep,
    reason: Annotated[Reason, Query(min_length=1, max_length=200)] = DEFAULT_REASON,
) -> Response:
    require_role(principal, "operator")
    await memory.delete(
        _scope(principal, user_id),
        memory_id,
        actor=principal.subject,
        reason=reason,
        role=principal.role,
    )
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(":forget", response_model=Forgotten)
async def forget_memories(
    user_id: UserId, body: ForgetRequest, principal: PrincipalDep, memory: MemoryDep
) -> Forgotten:
    require_role(principal, "operator")
    deleted = await memory.forget(
        _scope(principal, user_id),
        key=body.key,
        query=body.query,
        actor=principal.subject,
        reason=body.reason,
        role=principal.role,
    )
    return Forgotten(deleted=deleted)


@router.get("/{memory_id}/history", response_model=HistoryList, responses=NOT_FOUND)
async def memory_history(
    user_id: UserId, memory_id: MemoryId, principal: PrincipalDep, memory: MemoryDep
) -> HistoryList:
    entries = await memory.history(_scope(principal, user_id), memory_id)
    return HistoryList(items=[HistoryOut.of(e) for e in entries])
