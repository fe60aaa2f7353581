"""Session lifecycle: create, read, list, delete; the session's messages."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response, status

from app.api.deps import ConversationDep, PrincipalDep, VisibleSessionId
from app.api.params import MESSAGE_CURSOR, SESSION_CURSOR, cursor_query
from app.api.schemas import (
    CreateSession,
    ErrorResponse,
    MessageList,
    MessageOut,
    SessionList,
    SessionOut,
)

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "No such session"}
}


@router.post("", status_code=status.HTTP_201_CREATED, response_model=SessionOut)
async def create_session(
    body: CreateSession, principal: PrincipalDep, conversation: ConversationDep
) -> SessionOut:
    session = await conversation.create_session(principal, body.user_id, body.metadata)
    return SessionOut.of(session)


@router.get("", response_model=SessionList)
async def list_sessions(
    principal: PrincipalDep,
    conversation: ConversationDep,
    user_id: Annotated[str | None, Query(max_length=128)] = None,
    status: Annotated[Literal["active", "archived"] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, cursor_query(SESSION_CURSOR)] = None,
) -> SessionList:
    page = await conversation.list_sessions(
        principal, user_id=user_id, status=status, limit=limit, cursor=cursor
    )
    return SessionList(items=[SessionOut.of(s) for s in page.items], next_cursor=page.next_cursor)


@router.get("/{session_id}", response_model=SessionOut, responses=NOT_FOUND)
async def get_session(
    session_id: VisibleSessionId, principal: PrincipalDep, conversation: ConversationDep
) -> SessionOut:
    return SessionOut.of(await conversation.get_session(principal, session_id))


@router.delete("/{session_id}", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND)
async def delete_session(
    session_id: VisibleSessionId, principal: PrincipalDep, conversation: ConversationDep
) -> Response:
    await conversation.delete_session(principal, session_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/{session_id}/messages", response_model=MessageList, responses=NOT_FOUND)
async def list_messages(
    session_id: VisibleSessionId,
    principal: PrincipalDep,
    conversation: ConversationDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    cursor: Annotated[str | None, cursor_query(MESSAGE_CURSOR)] = None,
) -> MessageList:
    items, next_cursor = await conversation.list_messages(
        principal, session_id, cursor=cursor, limit=limit
    )
    return MessageList(items=[MessageOut.of(m) for m in items], next_cursor=next_cursor)
