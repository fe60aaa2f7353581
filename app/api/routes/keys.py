"""Managed API keys for admins, in their own tenant: create, list, revoke, rotate.

A key's secret appears once, in the answer that made it (create, rotate), and never again:
the database keeps a salted, peppered digest (`app.api.keys`). Each change is audited
(`key.created`, `key.revoked`, `key.rotated`). `hermes keys …` does the same from a shell.
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Path, Query, status
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.config import JsonDict

from app.api.auth import require_role
from app.api.deps import KeysDep, PrincipalDep
from app.api.keys import DURATION_PATTERN, Actor, KeyRecord, parse_duration
from app.api.params import MAX_ID_CHARS
from app.api.schemas import ErrorResponse, Label, Strict, iso
from app.errors import KeyNotFound
from app.principal import Principal, Role, binding_problem

router = APIRouter(prefix="/v1/keys", tags=["keys"])

_ERRORS: dict[int | str, dict[str, object]] = {
    403: {"model": ErrorResponse, "description": "Not an admin"},
}
_NOT_FOUND: dict[int | str, dict[str, object]] = {
    404: {"model": ErrorResponse, "description": "key_not_found: no such key in this tenant"},
}


# A customer key is bound to one customer and a staff key to none (app.principal): said in the
# schema too, so a client (or a fuzzer) knows which bodies are refused.
_BINDING: JsonDict = {
    "oneOf": [
        {
            "required": ["role", "user_id"],
            "properties": {"role": {"const": "customer"}, "user_id": {"type": "string"}},
        },
        {
            "required": ["role"],
            "properties": {
                "role": {"enum": ["agent", "operator", "admin"]},
                "user_id": {"type": "null"},
            },
        },
    ]
}


class CreateKey(Strict):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_BINDING)

    role: Role
    user_id: str | None = Field(
        None,
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9_.:@+-]+$",
        description="The one customer a customer key acts for (required for role customer, "
        "refused for the others: staff keys work their whole tenant)",
    )
    name: Label = Field("", max_length=200, description="A label for people, e.g. the frontend")
    expires_in: str | None = Field(
        None,
        pattern=DURATION_PATTERN,
        description="e.g. 90d, 12h, 2w, at most ten years (3650d, 521w); none: never",
    )

    @model_validator(mode="after")
    def _bound_as_the_role_says(self) -> CreateKey:
        problem = binding_problem(self.role, self.user_id)
        if problem is not None:
            raise ValueError(problem)
        return self


class KeyOut(BaseModel):
    id: str = Field(description="The key's public id (the principal's subject)")
    tenant_id: str
    role: str
    user_id: str | None
    name: str
    status: str = Field(description="active, expired or revoked")
    created_by: str
    created_at: str
    expires_at: str | None
    last_used_at: str | None = Field(description="Updated at most once a minute per process")
    revoked_at: str | None
    rotated_to: str | None

    @classmethod
    def of(cls, record: KeyRecord, now: float) -> KeyOut:
        return cls(
            id=record.id,
            tenant_id=record.tenant_id,
            role=record.role,
            user_id=record.user_id,
            name=record.name,
            status=record.status(now),
            created_by=record.created_by,
            created_at=iso(record.created_at) or "",
            expires_at=iso(record.expires_at),
            last_used_at=iso(record.last_used_at),
            revoked_at=iso(record.revoked_at),
            rotated_to=record.rotated_to,
        )


class KeyCreated(KeyOut):
    key: str = Field(description="The key itself: shown this once, never again")


class KeyList(BaseModel):
    items: list[KeyOut]


def _actor(principal: Principal) -> Actor:
    return Actor(principal.subject, principal.role)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=KeyCreated,
    responses=_ERRORS,
)
async def create_key(body: CreateKey, principal: PrincipalDep, keys: KeysDep) -> KeyCreated:
    require_role(principal, "admin")
    record, key = await keys.create(
        _actor(principal),
        tenant_id=principal.tenant_id,
        role=body.role,
        user_id=body.user_id,
        name=body.name,
        lifetime_s=None if body.expires_in is None else parse_duration(body.expires_in),
    )
    return KeyCreated(**KeyOut.of(record, time.time()).model_dump(), key=key)


@router.get("", response_model=KeyList, responses=_ERRORS)
async def list_keys(
    principal: PrincipalDep,
    keys: KeysDep,
    include_revoked: Annotated[bool, Query(description="Revoked keys too")] = False,
) -> KeyList:
    require_role(principal, "admin")
    records = await keys.list(principal.tenant_id, include_revoked=include_revoked)
    now = time.time()
    return KeyList(items=[KeyOut.of(r, now) for r in records])


KeyId = Annotated[str, Path(min_length=1, max_length=MAX_ID_CHARS, description="A key's id")]


@router.get("/{key_id}", response_model=KeyOut, responses={**_ERRORS, **_NOT_FOUND})
async def get_key(key_id: KeyId, principal: PrincipalDep, keys: KeysDep) -> KeyOut:
    require_role(principal, "admin")
    record = await keys.find(principal.tenant_id, key_id)
    if record is None:
        raise KeyNotFound("no such key", key_id=key_id)
    return KeyOut.of(record, time.time())


@router.post("/{key_id}/revoke", response_model=KeyOut, responses={**_ERRORS, **_NOT_FOUND})
async def revoke_key(key_id: KeyId, principal: PrincipalDep, keys: KeysDep) -> KeyOut:
    require_role(principal, "admin")
    record = await keys.revoke(principal.tenant_id, key_id, _actor(principal))
    if record is None:
        raise KeyNotFound("no such key", key_id=key_id)
    return KeyOut.of(record, time.time())


@router.post(
    "/{key_id}/rotate",
    status_code=status.HTTP_201_CREATED,
    response_model=KeyCreated,
    responses={**_ERRORS, **_NOT_FOUND},
)
async def rotate_key(key_id: KeyId, principal: PrincipalDep, keys: KeysDep) -> KeyCreated:
    """A new key like this one (role, user, name, lifetime); this one is revoked."""
    require_role(principal, "admin")
    rotated = await keys.rotate(principal.tenant_id, key_id, _actor(principal))
    if rotated is None:
        raise KeyNotFound("no such active key", key_id=key_id)
    record, key = rotated
    return KeyCreated(**KeyOut.of(record, time.time()).model_dump(), key=key)
