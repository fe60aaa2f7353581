"""The demo knowledge base's passages, as the store would hand them to a turn."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from app.knowledge.chunking import chunk
from app.knowledge.parsing import parse
from app.knowledge.passages import section_path

KNOWLEDGE = Path(__file__).resolve().parents[2] / "data" / "knowledge"


@cache
def passage(document: str, section: str) -> str:
    """The text of the chunk of `document` (a file name) whose section ends with `section`."""
    parsed = parse((KNOWLEDGE / document).read_bytes(), "markdown")
    texts = [c.text for c in chunk(parsed) if c.section[-1] == section]
    assert len(texts) == 1, (document, section, texts)
    return texts[0]


@cache
def sections(document: str) -> dict[str, str]:
    """Section path ("Refunds › Large refunds") -> the text of its chunks, for `document`."""
    out: dict[str, str] = {}
    for c in chunk(parse((KNOWLEDGE / document).read_bytes(), "markdown")):
        path = section_path(c.section)
        out[path] = f"{out[path]}\n{c.text}" if path in out else c.text
    return out
