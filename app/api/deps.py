"""Request dependencies: the runtime, the caller's principal, the services they use."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request

from app.api.auth import Authenticator
from app.conversation.service import ConversationService
from app.principal import Principal
from app.runtime import Runtime


def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def get_principal(
    request: Request,
    authorization: Annotated[str | None, Header()] = None,
    x_api_key: Annotated[str | None, Header()] = None,
) -> Principal:
    auth: Authenticator = request.app.state.auth
    return auth.resolve(authorization, x_api_key)


PrincipalDep = Annotated[Principal, Depends(get_principal)]


def get_conversation(runtime: RuntimeDep) -> ConversationService:
    return runtime.conversation


ConversationDep = Annotated[ConversationService, Depends(get_conversation)]
