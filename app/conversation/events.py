"""Session event fan-out: committed events to live subscribers, and replay-then-follow streams.

Events reach the bus only after their transaction commits, in commit order, so a follower that
subscribes *before* it reads the log and drops what it has already seen gets every event
exactly once. A follower that falls behind (its queue fills) goes back to the log.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable, Iterator
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

    async def exists(self, session_id: str) -> bool: ...


class Follower:
    """Every event of a session with seq > `after`, then live ones, exactly once and in order.

    It subscribes when created (before the caller starts the response), so nothing published
    between creating it and iterating it is missed. Iterating yields `None` when `keepalive_s`
    pass without an event. It stops after an event for which `until` is true, or when the
    session is gone. `aclose()` releases the subscription.
    """

    def __init__(
        self,
        bus: EventBus,
        log: EventLog,
        session_id: str,
        *,
        after: int,
        keepalive_s: float,
        until: Callable[[Event], bool] = lambda _event: False,
    ) -> None:
        self._log = log
        self._session_id = session_id
        self._last = after
        self._keepalive_s = keepalive_s
        self._until = until
        self._subscription = bus.subscribe(session_id)
        self._sub = self._subscription.__enter__()
        self._events = self._run()

    def __aiter__(self) -> Follower:
        return self

    async def __anext__(self) -> Event | None:
        return await self._events.__anext__()

    async def aclose(self) -> None:
        await self._events.aclose()
        self._subscription.__exit__(None, None, None)

    async def _run(self) -> AsyncGenerator[Event | None]:
        sub = self._sub
        while True:
            # Catch up from the log.
            while True:
                page = await self._log.after(self._session_id, self._last, _PAGE)
                for event in page:
                    yield event
                    self._last = event.seq
                    if self._until(event):
                        return
                if len(page) < _PAGE:
                    break
            if not page and not await self._log.exists(self._session_id):
                return
            # Follow live events until we fall behind.
            while True:
                if sub.overflowed:
                    sub.drain()
                    break
                item = await sub.get(self._keepalive_s)
                if item is None:
                    yield None
                    continue
                if isinstance(item, _Closed):
                    return
                if item.seq <= self._last:
                    continue
                if item.seq != self._last + 1:
                    break  # a gap: read it from the log
                yield item
                self._last = item.seq
                if self._until(item):
                    return
