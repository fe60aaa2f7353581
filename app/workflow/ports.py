"""What the workflow needs from the layer above it, named here so the imports run one way.

The conversation layer runs turns and owns sessions; the workflow only has to wake a
session's worker, end a stuck turn, and check that a session is the caller's.
`app.conversation.manager.TurnManager` and `app.conversation.service.ConversationService`
satisfy these protocols; the runtime wires them in.
"""

from __future__ import annotations

from typing import Protocol

from app.principal import Principal
from app.storage.records import Session


class TurnControl(Protocol):
    def wake(self, session_id: str) -> None:
        """Make sure a worker will look for queued turns of this session."""

    async def abort(self, turn_id: str, code: str, message: str) -> bool:
        """End a running turn from outside; the session carries on."""

    def running_turns(self) -> list[str]:
        """The turns running in this process (others may run elsewhere, on the same database)."""


class SessionLookup(Protocol):
    async def get_session(self, principal: Principal, session_id: str) -> Session:
        """The caller's session, or `SessionNotFound`."""
