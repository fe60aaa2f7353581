"""The seam between the turn loop and memory: two calls per turn, and what they return.

`before_turn` runs before the model call: it handles "forget that" / "忘掉这个", or recalls
what the turn needs. `after_turn` runs after the reply: it extracts and writes key facts and
verifies pending ones. `MemoryService` is the real implementation; `app.memory.testing`
has `NullMemory` for tests of the turn loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.memory.extract import Proposal, ToolEvidence
from app.memory.fence import Fence
from app.memory.prompt import MemoryMessage, memory_message, recalled_event
from app.memory.records import Scope, Written
from app.memory.scoring import Scored
from app.storage.session_writer import SessionWriter


@dataclass(frozen=True)
class Recall:
    items: list[Scored] = field(default_factory=list)
    reason: str | None = None  # why recall ran ("reference", "intent", "topic"); None: skipped
    fence: Fence = field(default_factory=Fence, compare=False)  # a new code per recall

    @property
    def message(self) -> MemoryMessage | None:
        """The fenced `user` message (named `hermes_memory`) to add to the context, or None.
        Quoted data, never `system` text."""
        return memory_message(self.items, self.fence)

    @property
    def untrusted_items(self) -> list[str]:
        """Ids of recalled memories that are free text from a conversation (origin
        `customer_text`): content that may carry someone's instructions."""
        return [s.item.id for s in self.items if s.item.untrusted]

    @property
    def untrusted(self) -> bool:
        """True when this recall puts customer-written free text into the turn; the turn's
        taint rule counts it as untrusted content."""
        return any(s.item.untrusted for s in self.items)

    @property
    def event(self) -> dict[str, Any] | None:
        """Data for a `memory.recalled` SSE event, or None when nothing was used."""
        return recalled_event(self.items, self.reason) if self.items else None


@dataclass(frozen=True)
class BeforeTurn:
    recall: Recall = field(default_factory=Recall)
    forgotten: list[str] = field(default_factory=list)  # ids deleted on "forget that"
    forget_command: bool = False


@dataclass(frozen=True)
class AfterTurn:
    written: list[Written] = field(default_factory=list)
    verified: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)


class TurnMemory(Protocol):
    """`writer` is the turn's (app/storage/session_writer.py): its session, and the lane and
    lease the turn's memory writes go with."""

    async def before_turn(
        self, scope: Scope, writer: SessionWriter, text: str, intent: str | None = None
    ) -> BeforeTurn: ...

    async def after_turn(
        self,
        scope: Scope,
        writer: SessionWriter,
        user_text: str,
        final_text: str = "",
        tool_results: Sequence[ToolEvidence] = (),
        previous_assistant: str = "",
        proposals: Sequence[Proposal] = (),
    ) -> AfterTurn: ...
