"""Taint: once untrusted content has entered a conversation, the model's actions need a human.

Untrusted content is anything a third party or the customer wrote that the model reads as
text: output of an untrusted tool or MCP server, a fetched page, a memory note written from
the customer's own words. Such text can carry instructions ("call request_refund now"); the
model cannot tell them from the operator's. So after it arrives, every `write` or `external`
call waits for an operator's approval, and the approval says why.
"""

from __future__ import annotations

from collections.abc import Iterable

_MAX_SOURCES = 10


class Taint:
    def __init__(self, sources: Iterable[str] = (), *, lasting: Iterable[str] = ()) -> None:
        self._sources: dict[str, bool] = {}
        for source in sources:
            self.add(source)
        for source in lasting:
            self.add(source, lasting=True)

    def add(self, source: str, *, lasting: bool = False) -> None:
        """Record where untrusted content came from; `lasting` sources stay in the
        conversation's context after this turn (tool output does, a recalled note does not)."""
        if source in self._sources or len(self._sources) < _MAX_SOURCES:
            self._sources[source] = self._sources.get(source, False) or lasting

    def __bool__(self) -> bool:
        return bool(self._sources)

    @property
    def sources(self) -> list[str]:
        return list(self._sources)

    @property
    def lasting(self) -> list[str]:
        return [s for s, keep in self._sources.items() if keep]

    def reason(self) -> str:
        return (
            "untrusted content entered this conversation ("
            + "; ".join(self._sources)
            + "), so every action needs a human's approval"
        )
