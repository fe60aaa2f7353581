"""Files and folders read into the knowledge base (`hermes kb add`, the first start's load).

A folder is read recursively; each file with a known suffix is one document whose source (its
identity in the tenant) is its path relative to the folder, or its name when the file was
named itself. A Markdown file's front matter gives the title, language, tags, source URL and
validity dates; the language is otherwise guessed from the text (Han characters against Latin
words). Dates are days: `valid_from: 2025-11-01` holds from that day's start, `valid_until:
2025-11-30` through that day's end (UTC).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.errors import HermesError, InvalidDocument
from app.knowledge.parsing import Format, decode, split_front_matter
from app.knowledge.records import Added
from app.knowledge.service import KnowledgeBase

SUFFIXES: dict[str, Format] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".txt": "text",
    ".pdf": "pdf",
}


@dataclass(frozen=True)
class Outcome:
    """One file: what adding it did, or why it was refused."""

    source: str
    added: Added | None = None
    error: HermesError | None = None


def files(paths: Sequence[Path]) -> Iterator[tuple[Path, str]]:
    """(file, source) for each file named or found under a folder named, in name order."""
    for path in paths:
        if path.is_dir():
            for found in sorted(path.rglob("*")):
                if found.is_file() and found.suffix.lower() in SUFFIXES:
                    yield found, found.relative_to(path).as_posix()
        else:
            yield path, path.name


def day_start(value: Any, *, end: bool = False) -> float | None:
    """A front-matter date as Unix seconds: the day's start, or (`end`) the next day's."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return moment.timestamp()
    if isinstance(value, str):
        try:
            value = dt.date.fromisoformat(value.strip())
        except ValueError:
            raise InvalidDocument(f"not a date (YYYY-MM-DD): {value!r}") from None
    if not isinstance(value, dt.date):
        raise InvalidDocument(f"not a date (YYYY-MM-DD): {value!r}")
    day = dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC)
    return (day + dt.timedelta(days=1 if end else 0)).timestamp()


def _tags(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(t.strip() for t in value.split(",") if t.strip())
    if isinstance(value, list):
        return tuple(str(t) for t in value)
    raise InvalidDocument(f"tags must be a list, got {value!r}")


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _read(path: Path, kb: KnowledgeBase) -> bytes:
    kb.check_size(path.stat().st_size)  # before reading it
    return path.read_bytes()


async def add_file(
    kb: KnowledgeBase,
    tenant_id: str,
    path: Path,
    source: str,
    *,
    trusted: bool = False,
    created_by: str = "cli",
) -> Added:
    format = SUFFIXES.get(path.suffix.lower())
    if format is None:
        raise InvalidDocument(
            f"unknown file type {path.suffix or path.name!r}: use {', '.join(SUFFIXES)}"
        )
    content = await asyncio.to_thread(_read, path, kb)
    meta: dict[str, Any] = {}
    if format == "markdown":
        meta, _ = split_front_matter(decode(content))
    return await kb.add(
        tenant_id,
        source=source,
        content=content,
        format=format,
        title=_text(meta.get("title")),
        language=_text(meta.get("language")),
        tags=_tags(meta.get("tags")),
        source_url=_text(meta.get("source_url")),
        valid_from=day_start(meta.get("valid_from")),
        valid_until=day_start(meta.get("valid_until"), end=True),
        trusted=trusted,
        created_by=created_by,
    )


async def add_paths(
    kb: KnowledgeBase,
    tenant_id: str,
    paths: Sequence[Path],
    *,
    trusted: bool = False,
    created_by: str = "cli",
) -> list[Outcome]:
    """Each file added in turn; one that cannot be read is reported and the rest go on."""
    out = []
    for path, source in files(paths):
        try:
            added = await add_file(
                kb, tenant_id, path, source, trusted=trusted, created_by=created_by
            )
        except HermesError as exc:
            out.append(Outcome(source, error=exc))
        else:
            out.append(Outcome(source, added=added))
    return out
