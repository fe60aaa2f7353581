"""Session event fan-out: committed events to live subscribers, and replay-then-follow streams.

Events reach the bus only after their transaction commits, in commit order, so a follower that
subscribes *before* it reads the log and drops what it has already seen gets every event
exactly once. A follower that falls behind (its queue fills) goes back to the log.

With a relay attached (`app.conversation.fanout`: Redis between processes), events committed by
another process arrive too. Such a live source can lose messages (a subscription that is still
starting, a broken connection), so the relay can ask the followers of a session to *recheck*:
read the log once more. Every loss is then either a gap the next event reveals or a recheck.

The log itself has holes: a completed turn's superseded events are deleted at its end
(`app.storage.event_log.drop_superseded`), so a live event after a gap may be followed in the log
by fewer events than were published. Reading the log still moves a follower past the event
that showed the gap: either that event is stored, or it was deleted by the transaction that
stored the turn's final events after it. So a gap never loops, and what the log no longer
has, those later events carry.

A log that cannot be read (the database is away: `DatabaseUnavailable`) is read again after a
pause, the follower yielding keep-alives meanwhile: a client waiting on a turn keeps waiting
through an outage the turn itself waits out (app/conversation/manager.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable, Iterator
from typing import Protocol

from app.errors import DatabaseUnavailable
from app.storage.outage import FIRST_PAUSE_S, MAX_PAUSE_S
from app.storage.records import Event

_QUEUE_SIZE = 1024
_PAGE = 500


class _Closed:
    """Sentinel: the session was deleted; followers end."""


_CLOSED = _Closed()


class _Recheck:
    """Sentinel: read the log again; the live source may have missed something."""


_RECHECK = _Recheck()


class Subscription:
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.overflowed = False
        self._queue: asyncio.Queue[Event | _Closed | _Recheck] = asyncio.Queue(_QUEUE_SIZE)
        self._recheck_queued = False  # one pending recheck is enough

    def put(self, item: Event | _Closed | _Recheck) -> None:
        if isinstance(item, _Recheck):
            if self._recheck_queued:
                return
            self._recheck_queued = True
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:
            self.overflowed = True  # the follower reads the log: a recheck too

    def drain(self) -> None:
        while not self._queue.empty():
            self._queue.get_nowait()
        self.overflowed = False
        self._recheck_queued = False

    async def get(self, wait_s: float) -> Event | _Closed | _Recheck | None:
        try:
            item = await asyncio.wait_for(self._queue.get(), wait_s)
        except TimeoutError:
            return None
        if isinstance(item, _Recheck):
            self._recheck_queued = False
        return item


class Relay(Protocol):
    """Carries a bus's committed events to other processes (`app.conversation.fanout`), and
    learns which sessions have followers here: it brings back only theirs."""

    def send(self, events: list[Event]) -> None: ...

    def send_close(self, session_id: str) -> None: ...

    def watch(self, session_id: str) -> None: ...

    def unwatch(self, session_id: str) -> None: ...


class EventBus:
    """In-process fan-out of committed events, keyed by session; with a relay, across processes.

    `publish` and `close_session` are for what happened here (local subscribers at once, then
    the relay); `deliver`, `deliver_close` and `recheck` are the relay's way in, local only.
    """

    def __init__(self) -> None:
        self._subs: dict[str, set[Subscription]] = {}
        self.relay: Relay | None = None

    def attach(self, relay: Relay) -> None:
        """Send to (and hear from) other processes through `relay`, from now on."""
        self.relay = relay
        for session_id in self._subs:
            relay.watch(session_id)

    def publish(self, events: list[Event]) -> None:
        self.deliver(events)
        if self.relay is not None:
            self.relay.send(events)

    def close_session(self, session_id: str) -> None:
        self.deliver_close(session_id)
        if self.relay is not None:
            self.relay.send_close(session_id)

    def deliver(self, events: list[Event]) -> None:
        for event in events:
            for sub in self._subs.get(event.session_id, ()):
                sub.put(event)

    def deliver_close(self, session_id: str) -> None:
        for sub in self._subs.get(session_id, ()):
            sub.put(_CLOSED)

    def recheck(self, session_id: str) -> None:
        """The session's followers read the log once more (they drop what they have seen)."""
        for sub in self._subs.get(session_id, ()):
            sub.put(_RECHECK)

    def sessions(self) -> list[str]:
        """The sessions with subscribers here."""
        return list(self._subs)

    @contextlib.contextmanager
    def subscribe(self, session_id: str) -> Iterator[Subscription]:
        sub = Subscription(session_id)
        subs = self._subs.setdefault(session_id, set())
        subs.add(sub)
        if len(subs) == 1 and self.relay is not None:
            self.relay.watch(session_id)
        try:
            yield sub
        finally:
            remaining = self._subs.get(session_id)
            if remaining is not None:
                remaining.discard(sub)
                if not remaining:
                    del self._subs[session_id]
                    if self.relay is not None:
                        self.relay.unwatch(session_id)

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
        pause = FIRST_PAUSE_S
        while True:
            # Catch up from the log.
            while True:
                try:
                    page = await self._log.after(self._session_id, self._last, _PAGE)
                    gone = not page and not await self._log.exists(self._session_id)
                except DatabaseUnavailable:
                    yield None  # (a keep-alive: the stream stays open while the log is away)
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, MAX_PAUSE_S)
                    continue
                pause = FIRST_PAUSE_S
                for event in page:
                    yield event
                    self._last = event.seq
                    if self._until(event):
                        return
                if len(page) < _PAGE:
                    break
            if gone:
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
                if isinstance(item, _Recheck):
                    break
                if item.seq <= self._last:
                    continue
                if item.seq != self._last + 1:
                    break  # a gap: read it from the log
                yield item
                self._last = item.seq
                if self._until(item):
                    return
