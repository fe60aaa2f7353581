"""A parsed document cut into passages to search and cite.

A chunk never crosses a section boundary (its section path is its citation), never splits a
list or a table (a table cut in two answers nothing), and splits a long paragraph only at a
sentence end, Chinese (。！？) or English (. ! ?). Consecutive blocks of one section share a
chunk while they fit.

The defaults: 600 characters is one rule with its conditions (a refund period and the payment
methods it depends on, a region list) and about what a reader takes in at a glance; five such
passages (the default top-k) stay under ~3,000 characters of context. Shorter chunks would part
a rule from its condition, longer ones dilute BM25 scores and the citation. A chunk that had to
be cut mid-section starts with up to 80 characters (a short sentence) of the one before it, so
a fact stated across the cut is still whole in one of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from app.knowledge.parsing import Block, ParsedDocument, join_lines

TARGET_CHARS = 600
OVERLAP_CHARS = 80


@dataclass(frozen=True)
class Chunk:
    ordinal: int
    section: tuple[str, ...]
    text: str


def chunk(
    document: ParsedDocument,
    *,
    target_chars: int = TARGET_CHARS,
    overlap_chars: int = OVERLAP_CHARS,
) -> list[Chunk]:
    """The document's chunks in reading order, numbered from 0."""
    if target_chars < 1 or overlap_chars < 0:
        raise ValueError("target_chars must be positive and overlap_chars not negative")
    overlap_chars = min(overlap_chars, target_chars // 2)
    texts: list[tuple[tuple[str, ...], str]] = []
    for section, blocks in _by_section(document.blocks):
        texts.extend(
            (section, text) for text in _section_chunks(blocks, target_chars, overlap_chars)
        )
    return [Chunk(ordinal, section, text) for ordinal, (section, text) in enumerate(texts)]


def _by_section(blocks: list[Block]) -> Iterator[tuple[tuple[str, ...], list[Block]]]:
    run: list[Block] = []
    for block in blocks:
        if run and block.section != run[0].section:
            yield run[0].section, run
            run = []
        run.append(block)
    if run:
        yield run[0].section, run


def _section_chunks(blocks: list[Block], target: int, overlap: int) -> Iterator[str]:
    """Pieces (whole lists and tables, sentences) packed into chunks of about `target`."""
    parts: list[tuple[str, str]] = []  # (separator, piece) of the chunk being filled
    size = 0
    carried = False  # parts holds only the overlap from the chunk before
    for block in blocks:
        whole = block.kind != "paragraph"
        pieces = [block.text] if whole else list(_pieces(block.text, target))
        for index, piece in enumerate(pieces):
            separator = "\n" if (whole or index == 0) else " "
            # A short lead-in ("We accept:") stays with the list or table it introduces.
            lead_in = whole and size <= target // 4
            if (
                parts
                and not carried
                and not lead_in
                and size + len(separator) + len(piece) > target
            ):
                yield _joined(parts)
                tail = "" if whole or index == 0 else _tail(parts[-1][1], overlap)
                parts, size, carried = ([("", tail)], len(tail), True) if tail else ([], 0, False)
            if parts:
                size += len(separator)
            else:
                separator = ""
            parts.append((separator, piece))
            size += len(piece)
            carried = False
    if parts and not carried:
        yield _joined(parts)


def _joined(parts: list[tuple[str, str]]) -> str:
    out = ""
    for separator, piece in parts:
        if separator == " " and out:
            out = join_lines([out, piece])
        else:
            out += separator + piece
    return out.strip()


_SENTENCE_END = re.compile(r"(?<=[。！？])[”’」』）)]*|(?<=[.!?])[\"')\]]*(?=\s)")


def sentences(text: str) -> list[str]:
    """`text` cut after each sentence end; the pieces put back together are the text."""
    out: list[str] = []
    start = 0
    for end in _SENTENCE_END.finditer(text):
        if end.end() > start:
            out.append(text[start : end.end()].strip())
            start = end.end()
    out.append(text[start:].strip())
    return [sentence for sentence in out if sentence]


def _pieces(text: str, target: int) -> Iterator[str]:
    """A paragraph's sentences; one longer than `target` is cut at a comma or a space."""
    for sentence in sentences(text):
        while len(sentence) > target:
            cut = _cut_point(sentence, target)
            yield sentence[:cut].strip()
            sentence = sentence[cut:].strip()
        if sentence:
            yield sentence


def _cut_point(text: str, limit: int) -> int:
    window = text[:limit]
    for marks in ("，、,;:：", " "):
        found = max(window.rfind(mark) for mark in marks)
        if found > limit // 2:
            return found + 1
    return limit


def _tail(sentence: str, overlap: int) -> str:
    """What of the last piece starts the next chunk: the whole sentence when it is short,
    otherwise its end, from a word boundary."""
    if overlap <= 0:
        return ""
    if len(sentence) <= overlap:
        return sentence
    tail = sentence[-overlap:]
    space = tail.find(" ")
    return tail[space + 1 :] if 0 <= space < overlap // 2 else tail
