"""What a search of the knowledge base returns, and what a reply cites.

A `Passage` is one stored chunk that passed the score threshold, with enough of its document
to cite it (title, section path) and to judge it (language, whether an admin marked the
document trusted). A `Citation` is the part of a passage that travels with a reply: the
stored assistant message and `message.completed` carry a list of them, each built by
`Citation.of` and sent as `as_dict` gives it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from app.knowledge.snippets import opening

SECTION_SEPARATOR = " › "
# The tool a turn searches the knowledge base with (tools.yaml's built-in,
# app/tools/builtin/knowledge.py): the Ground stage and `hermes/local` find its calls by it.
SEARCH_TOOL = "search_knowledge"


def section_path(section: tuple[str, ...] | list[str]) -> str:
    """("Returns", "Shipping costs") -> "Returns › Shipping costs"."""
    return SECTION_SEPARATOR.join(section)


def source_name(title: str, section: str) -> str:
    """How a reply names a passage's source: its title and section path, the title once
    ("Refunds" and "Refunds › Large refunds" -> "Refunds › Large refunds"; a document's
    first heading is usually its title)."""
    inner = section.split(SECTION_SEPARATOR, 1)[-1] if section.startswith(title) else section
    return f"{title}{SECTION_SEPARATOR}{inner}" if inner and inner != title else title


@dataclass(frozen=True)
class Citation:
    document_id: str
    chunk_id: str
    title: str
    section: str
    snippet: str  # the start of the passage's text on one line, for a person (`opening`)

    @classmethod
    def of(cls, passage: Mapping[str, Any]) -> Citation:
        """The citation of a passage given by its fields: as the `search_knowledge` tool shows
        it to the model (the turn cites from those), or a `Passage`'s own. A field that is
        missing reads as ""."""

        def field(key: str) -> str:
            return str(passage.get(key, ""))

        return cls(
            field("document_id"),
            field("chunk_id"),
            field("title"),
            field("section"),
            opening(field("text")),
        )

    def as_dict(self) -> dict[str, str]:
        return {
            "document_id": self.document_id,
            "chunk_id": self.chunk_id,
            "title": self.title,
            "section": self.section,
            "snippet": self.snippet,
        }


@dataclass(frozen=True)
class Passage:
    document_id: str
    chunk_id: str
    title: str
    section: str  # the section path, "Returns › Shipping costs"; "" for text before any heading
    text: str
    language: str  # "zh" or "en"
    score: float  # 0..1, comparable with the threshold on both engines
    trusted: bool = False  # an admin marked the document trusted (see the taint rule)
    version: int = 1
    source_url: str | None = None

    @property
    def citation(self) -> Citation:
        return Citation.of(asdict(self))


class KnowledgeSearch(Protocol):
    """The one call the turn (the `search_knowledge` tool, `hermes/local`) makes. Returns at
    most `limit` (default: the `knowledge` settings' top-k) passages scoring at least the
    threshold, best first, from documents valid now; [] when nothing passes."""

    async def search(
        self,
        tenant_id: str,
        query: str,
        *,
        language: str | None = None,
        limit: int | None = None,
    ) -> list[Passage]: ...
