"""Labels people read in listings (key names, session metadata, reasons): what they may hold.

A label is shown to someone choosing between rows (the keys page, the handoff queue), so it
must read as what it is. Controls (NUL among them), invisible format characters (zero-width
spaces and joiners, the bidirectional overrides and isolates that make `txt.exe` read as
`exe.txt`, the tag characters that smuggle hidden ASCII) and lone surrogates go; a line or
tab break becomes a space. As memory values are neutralised (`app.memory.fence`), labels are
cleaned rather than refused: nothing a client sends is lost but the invisible part.
"""

from __future__ import annotations

import unicodedata
from typing import Any

_BREAKS = frozenset("\t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\u2028\u2029")
_HIDDEN = frozenset({"Cc", "Cf", "Cs"})  # controls, invisible format characters, surrogates


def clean_label(text: str) -> str:
    """`text` without its hidden characters, each break a space."""
    if text.isprintable():  # the per-character pass only for text that needs it
        return text
    return "".join(
        " " if ch in _BREAKS else ch
        for ch in text
        if ch in _BREAKS or unicodedata.category(ch) not in _HIDDEN
    )


def clean_labels(value: Any) -> Any:
    """Every string in a JSON value cleaned, object keys too (a later key wins when two keys
    clean to the same)."""
    if isinstance(value, str):
        return clean_label(value)
    if isinstance(value, dict):
        return {clean_label(str(k)): clean_labels(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_labels(v) for v in value]
    return value
