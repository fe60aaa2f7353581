"""Plain records of the memory package: who a memory belongs to, the memory, its history."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Literal

from app.memory.origin import Origin, classify

Tier = Literal["fact", "node"]
Status = Literal["active", "pending", "archived", "rejected"]
Source = Literal["user", "tool", "operator", "model", "rule"]


# fact_type is the first segment of a key when it names one of these; otherwise "note".
FACT_TYPES: tuple[str, ...] = ("preference", "contact", "decision", "profile", "event", "note")


@dataclass(frozen=True)
class Scope:
    """The one user whose memories an operation may see. Every query filters by both."""

    tenant_id: str
    user_id: str


def fact_type_of(key: str) -> str:
    head = key.split(".", 1)[0].split(":", 1)[0]
    return head if head in FACT_TYPES else "note"


@dataclass(frozen=True)
class MemoryItem:
    id: str
    pk: int
    tenant_id: str
    user_id: str
    tier: Tier
    key: str
    value: str
    entity: str | None
    fact_type: str
    confidence: float
    status: Status
    source: Source
    source_session_id: str | None
    valid_until: float | None
    created_at: float
    updated_at: float
    last_confirmed_at: float
    last_accessed_at: float | None = None
    search_text: str = ""
    embedding: bytes | None = None
    origin: Origin = "customer_text"

    @property
    def untrusted(self) -> bool:
        """Free text from a conversation: quoted data that may carry someone's instructions."""
        return self.origin == "customer_text"

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> MemoryItem:
        names = row.keys()
        stored = row["origin"] if "origin" in names else None
        origin = stored or classify(row["tier"], row["key"], row["value"], row["source"])
        return cls(
            id=row["id"],
            pk=row["pk"],
            tenant_id=row["tenant_id"],
            user_id=row["user_id"],
            tier=row["tier"],
            key=row["key"],
            value=row["value"],
            entity=row["entity"],
            fact_type=row["fact_type"],
            confidence=row["confidence"],
            status=row["status"],
            source=row["source"],
            source_session_id=row["source_session_id"],
            valid_until=row["valid_until"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            last_confirmed_at=row["last_confirmed_at"],
            last_accessed_at=row["last_accessed_at"],
            search_text=row["search_text"],
            embedding=row["embedding"] if "embedding" in names else None,
            origin=origin,
        )


@dataclass(frozen=True)
class HistoryEntry:
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
    at: float

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> HistoryEntry:
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Draft:
    """A memory about to be written: what extraction, an operator or a tool proposes."""

    key: str
    value: str
    tier: Tier = "fact"
    entity: str | None = None
    fact_type: str | None = None  # derived from the key when None
    confidence: float = 1.0
    status: Literal["active", "pending"] = "active"
    source: Source = "user"
    valid_until: float | None = None
    embedding: bytes | None = None
    embedding_model: str | None = None

    @property
    def kind(self) -> str:
        return self.fact_type or fact_type_of(self.key)


@dataclass(frozen=True)
class Written:
    item: MemoryItem
    action: Literal["created", "updated", "confirmed", "proposed", "verified", "unchanged"]


@dataclass(frozen=True)
class SweepReport:
    archived: int = 0
    expired: int = 0
    rejected: int = 0
    purged: int = 0
    batches: int = 0
    index_steps: int = 0  # write jobs that merged the full-text index
    purged_ids: list[str] = field(default_factory=list)
