"""Doubles for the turn's collaborators that every deployment has: null objects and a recording
memory (nothing in production runs without the real ones, so these live here, not in app/)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.conversation.budgets import TurnMeter
from app.memory.port import AfterTurn, BeforeTurn, Recall
from app.memory.testing import NullMemory
from app.principal import Principal
from app.storage.records import Turn
from app.storage.session_writer import SessionWriter
from app.storage.usage import Usage


class NoBudgets:
    """No caps and nothing counted: every turn is admitted, none is metered."""

    async def admit(self, principal: Principal, session_id: str) -> None:
        return None

    async def meter(self, tenant_id: str, session_id: str, used: Usage) -> TurnMeter | None:
        return None


@dataclass
class EndedTurns:
    """A handoff desk that only notes what it was told: (turn id, intent, language)."""

    told: list[tuple[str, str | None, str | None]] = field(default_factory=list)

    async def turn_ended(
        self, writer: SessionWriter, turn: Turn, intent: str | None, language: str | None
    ) -> None:
        self.told.append((turn.id, intent, language))


@dataclass
class RecordingMemory(NullMemory):
    """A turn memory that recalls the queued `Recall`s (then nothing) and notes every call,
    its arguments by name."""

    recalls: list[Recall] = field(default_factory=list)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    async def before_turn(self, *args: Any, **kwargs: Any) -> BeforeTurn:
        self._note(NullMemory.before_turn, args, kwargs)
        return BeforeTurn(self.recalls.pop(0) if self.recalls else Recall())

    async def after_turn(self, *args: Any, **kwargs: Any) -> AfterTurn:
        self._note(NullMemory.after_turn, args, kwargs)
        return AfterTurn()

    def _note(self, method: Callable[..., Any], args: Any, kwargs: Any) -> None:
        bound = inspect.signature(method).bind(self, *args, **kwargs)
        bound.apply_defaults()
        named = {k: v for k, v in bound.arguments.items() if k != "self"}
        self.calls.append((method.__name__, named))
