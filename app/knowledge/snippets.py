"""Short excerpts of a passage: what a person sees of it, not what the model reads.

`snippet` is a search hit's (the API's `snippet`, the desk's Knowledge page): the passage
around the words a question matched. `opening` is a citation's (the `snippet` of a reply's
`citations`, the desk's transcript): the start of the passage, the same whatever was asked.

For `snippet`, the passage's white space is folded to single spaces (a table's rows, a list's
items), and the excerpt is the window of `width` characters that holds the most places where a
question unit occurs (app/knowledge/analysis.py: a Latin word's stem, a Chinese character
pair), starting a little before the first of them, cut at a word boundary where the text has
one. `…` marks a cut.
"""

from __future__ import annotations

import re

from app.knowledge.analysis import bigrams, normalize, question_units, stem
from app.text.script import HAN

WIDTH = 200  # characters: two lines of a results list
OPENING = 160  # characters: a citation's excerpt, about two lines of the desk's transcript
LEAD = WIDTH // 5  # shown before the first match, so it is read in its sentence
ELLIPSIS = "…"

_RUNS = re.compile(f"[A-Za-z0-9]+|[{HAN}]+")


def snippet(text: str, query: str, width: int = WIDTH) -> str:
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    hits = matches(text, query)
    start = max(0, _densest(hits, width) - LEAD) if hits else 0
    end = min(len(text), start + width)
    start = max(0, end - width)  # a window that reaches the end starts earlier instead
    start, end = _at_word(text, start, forward=True), _at_word(text, end, forward=False)
    return (
        (ELLIPSIS if start > 0 else "")
        + text[start:end].strip()
        + (ELLIPSIS if end < len(text) else "")
    )


def matches(text: str, query: str) -> list[int]:
    """Where in `text` a unit of `query` starts, in order."""
    units = set(question_units(query))
    found = []
    for run in _RUNS.finditer(text):
        word = run.group()
        if word.isascii():
            if stem(normalize(word)) in units:
                found.append(run.start())
            continue
        found.extend(run.start() + i for i, pair in enumerate(bigrams(word)) if pair in units)
    return found


def _densest(hits: list[int], width: int) -> int:
    """The hit that begins the window of `width` with the most hits (the first such)."""
    best, best_count, last = hits[0], 0, 0
    for i, first in enumerate(hits):
        last = max(last, i)
        while last + 1 < len(hits) and hits[last + 1] < first + width - LEAD:
            last += 1
        if last - i + 1 > best_count:
            best, best_count = first, last - i + 1
    return best


def _at_word(text: str, at: int, *, forward: bool) -> int:
    """`at` moved (at most 15 characters) to a space, so no Latin word is cut in two."""
    if at <= 0 or at >= len(text) or not (text[at - 1].isalnum() and text[at].isalnum()):
        return at
    if not text[at].isascii():
        return at  # Chinese has no spaces: any place is a boundary
    space = text.find(" ", at, at + 15) if forward else text.rfind(" ", max(0, at - 15), at)
    return at if space < 0 else space


def opening(text: str, limit: int = OPENING) -> str:
    """The start of a passage's text on one line, at most `limit` characters (a table's rows
    as "cell: cell", separated by " · "): cut at a word boundary when there is one in its
    second half (Chinese has none), ending in "…"."""
    flat, row = "", False
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        was_row, row = row, line.startswith("|") and line.endswith("|")
        if row:
            line = ": ".join(cell.strip() for cell in line.strip("|").split("|"))
        flat += (" · " if row or was_row else " ") + line if flat else line
    flat = " ".join(flat.split())
    if len(flat) <= limit:
        return flat
    head = flat[: limit - 1]
    space = head.rfind(" ")
    if space > limit // 2:
        head = head[:space]
    return head.rstrip(" ,;:.·") + ELLIPSIS
