"""Session event fan-out: committed events to live subscribers, and replay-then-follow streams.

Events reach the bus only after their transaction commits, in commit order, so a follower that
subscribes *before* it reads the log and drops what it has already seen gets every event
exactly once. A follower that falls behind (its queue fills) goes back to the log.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Protocol

from app.storage.records import Event

_QUEUE_SIZE = 1024
_PAGE = 500


class _Closed:
    """Sentinel: the session was deleted; followers end."""


_CLOSED = _Closed()


class Subscription:
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.overflowed = False
        self._queue: asyncio.Queue[Event | _Closed] = asyncio.Queue(_QUEUE_SIZE)

    def put(self, item: Event | _Closed) -> None:
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:
            self.overflowed = True

    def drain(self) -> None:
        while not self._queue.empty():
            self._queue.get_nowait()
        self.overflowed = False

    async def get(self, wait_s: float) -> Event | _Closed | None:
        try:
            return await asyncio.wait_for(self._queue.get(), wait_s)
        except TimeoutError:
            return None


class EventBus:
    """In-process fan-out of committed events, keyed by session."""

    def __init__(self) -> None:
        self._subs: dict[str, set[Subscription]] = {}

    def publish(self, events: list[Event]) -> None:
        for event in events:
            for sub in self._subs.get(event.session_id, ()):
                sub.put(event)

    def close_session(self, session_id: str) -> None:
        for sub in self._subs.get(session_id, ()):
            sub.put(_CLOSED)

    @contextlib.contextmanager
    def subscribe(self, session_id: str) -> Iterator[Subscription]:
        sub = Subscription(session_id)
        self._subs.setdefault(session_id, set()).add(sub)
        try:
            yield sub
        finally:
            subs = self._subs.get(session_id)
            if subs is not None:
                subs.discard(sub)
                if not subs:
                    del self._subs[session_id]

    def subscriber_count(self) -> int:
        return sum(len(s) for s in self._subs.values())


class EventLog(Protocol):
    async def after(self, session_id: str, after_seq: int, limit: int = ...) -> list[Event]: ...


async def follow(
    bus: EventBus,
    log: EventLog,
    session_id: str,
    *,
    after: int,
    keepalive_s: float,
    until: Callable[[Event], bool] = lambda _event: False,
) -> AsyncIterator[Event | None]:
    """Every event of the session with seq > `after`, then live ones, exactly once and in order.

    Yields `None` when `keepalive_s` pass without an event (the caller sends a keep-alive).
    Stops after an event for which `until` is true, or when the session is deleted.
    """
    last = after
    with bus.subscribe(session_id) as sub:
        while True:
            # Catch up from the log.
            while True:
                page = await log.after(session_id, last, _PAGE)
                for event in page:
                    yield event
                    last = event.seq
                    if until(event):
                        return
                if len(page) < _PAGE:
                    break
            # Follow live events until we fall behind.
            while True:
                if sub.overflowed:
                    sub.drain()
                    break
                item = await sub.get(keepalive_s)
                if item is None:
                    yield None
                    continue
                if isinstance(item, _Closed):
                    return
                if item.seq <= last:
                    continue
                if item.seq != last + 1:
                    break  # a gap: read it from the log
                yield item
                last = item.seq
                if until(item):
                    return
