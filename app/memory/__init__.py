"""Per-user memory: mid-term facts and long-term knowledge nodes in SQLite, with decay,
recall, extraction after each turn, and forgetting. Wiring: `open_memory` + `MemorySweeper`.
"""

from __future__ import annotations

from app.memory.decay import DecayPolicy
from app.memory.embeddings import Embedder, LiteLLMEmbedder
from app.memory.extract import Proposal, ToolEvidence
from app.memory.port import AfterTurn, BeforeTurn, Recall, TurnMemory
from app.memory.records import MemoryItem, Scope
from app.memory.scoring import ScoringConfig
from app.memory.service import MemoryService
from app.memory.sweep import Retention
from app.memory.sweeper import MemorySweeper
from app.settings import Settings
from app.storage.port import Database

__all__ = [
    "AfterTurn",
    "BeforeTurn",
    "MemoryItem",
    "MemoryService",
    "MemorySweeper",
    "Proposal",
    "Recall",
    "Scope",
    "ToolEvidence",
    "TurnMemory",
    "build_embedder",
    "open_memory",
]


def build_embedder(settings: Settings) -> Embedder | None:
    """A LiteLLM embedder when `HERMES_EMBEDDING_MODEL` is set; it shares the chat model's
    API base and key only when both use the same provider (as fallback models do)."""
    model = settings.memory.embedding_model
    if not model:
        return None
    same = model.split("/", 1)[0] == settings.model.name.split("/", 1)[0]
    key = settings.model.key
    return LiteLLMEmbedder(
        model,
        api_base=settings.model.api_base if same else None,
        api_key=key if same else None,
    )


def open_memory(
    db: Database, settings: Settings, *, embedder: Embedder | None = None
) -> MemoryService:
    """The memory service over an open database (migration 0003 applied)."""
    return MemoryService(
        db,
        policy=DecayPolicy.from_settings(settings.memory),
        scoring=ScoringConfig.from_settings(settings.memory),
        retention=Retention(),
        embedder=embedder if embedder is not None else build_embedder(settings),
    )
