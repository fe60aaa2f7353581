"""A parse cache: the same text parsed again the same day gives the same result.

Each turn reads a few earlier user messages again (continuation, the offline model's slot
memory); caching makes that one parse per message instead of one per message per turn. The
day is part of the key because relative dates ("明天") resolve against it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from datetime import date

from app.nlu.types import Parser, ParseResult


class CachingParser:
    def __init__(
        self, parser: Parser, maxsize: int = 4096, today: Callable[[], date] = date.today
    ) -> None:
        self.parser = parser
        self.maxsize = maxsize
        self._today = today
        self._cache: OrderedDict[tuple[str, date], ParseResult] = OrderedDict()
        self.hits = self.misses = 0

    def parse(self, text: str) -> ParseResult:
        key = (text, self._today())
        found = self._cache.get(key)
        if found is not None:
            self._cache.move_to_end(key)
            self.hits += 1
            return found
        self.misses += 1
        result = self.parser.parse(text)
        self._cache[key] = result
        if len(self._cache) > self.maxsize:
            self._cache.popitem(last=False)
        return result
