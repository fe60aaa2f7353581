"""What the knowledge store keeps of a document, and what adding one did."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from app.knowledge.parsing import Format

Action = Literal["added", "updated", "unchanged"]


@dataclass(frozen=True)
class Document:
    id: str
    tenant_id: str
    source: str  # its identity in the tenant: a file name, a source URL or a title
    title: str
    language: str
    format: Format
    tags: tuple[str, ...]
    source_url: str | None
    version: int
    content_hash: str
    valid_from: float | None  # Unix seconds; not retrieved before
    valid_until: float | None  # not retrieved from
    trusted: bool
    created_by: str
    chunk_count: int
    created_at: float
    updated_at: float

    @classmethod
    def from_row(cls, row: Any) -> Document:
        return cls(
            id=row["id"],
            tenant_id=row["tenant_id"],
            source=row["source"],
            title=row["title"],
            language=row["language"],
            format=row["format"],
            tags=tuple(json.loads(row["tags"])),
            source_url=row["source_url"],
            version=int(row["version"]),
            content_hash=row["content_hash"],
            valid_from=row["valid_from"],
            valid_until=row["valid_until"],
            trusted=bool(row["trusted"]),
            created_by=row["created_by"],
            chunk_count=int(row["chunk_count"]),
            created_at=row["created_at"],
            updated_at=row["updated_at"],
        )


@dataclass(frozen=True)
class Added:
    """A document after `add`: new, a new version of its source, or the same as stored."""

    document: Document
    action: Action

    @property
    def created(self) -> bool:
        return self.action == "added"

    @property
    def changed(self) -> bool:
        return self.action != "unchanged"


@dataclass(frozen=True)
class DocumentPage:
    items: list[Document]
    next_cursor: str | None
