"""Session events across processes: a bus's committed events go out through Redis pub/sub, and
the events other processes commit come back to the sessions followed here.

Pub/sub, not streams, because the database already is the durable, ordered log (events with
their per-session sequence) that every process can replay from. What Redis adds is only *now*:
telling the processes whose browsers follow a session that it has new events, with the events
themselves so nobody has to read them. Pub/sub keeps nothing in Redis (no second copy of every
event to trim), costs one PUBLISH per commit, and a process receives exactly the sessions it
subscribed to, those with local followers (one channel each, `<prefix>:events:<session>`).

What pub/sub does not give, delivery to a subscriber that was not connected, the log gives:
- every message carries the events' sequence numbers, so a follower that sees a gap reads the
  log (`Follower`);
- when a channel's subscription is confirmed (the first local follower, or again after Redis
  came back) the session's followers recheck the log once: what was published before then is
  there;
- while the subscription is down, followers recheck every `poll_s` (the database is polled,
  only for sessions followed here, only while Redis is away);
- a process that could not publish tells those sessions' channels to recheck when Redis is back.
Duplicates are harmless: followers drop what is not after the last sequence they sent.

A message is JSON: `{"origin": <process>, "events": [<row>, ...]}` where each row has the
fields a replay from the log reads (session, seq, tenant, turn, type, time; the table itself
keys them by integers) and `data` is the stored JSON text itself, so a follower here builds
exactly the event a replay from the log builds, and sends the same bytes. Sequence numbers
only grow but may have holes (a completed turn's superseded events are deleted at its end):
a follower that sees one reads the log, which has every later event still stored. Other kinds:
`{"origin", "closed": true}` (the session was deleted) and `{"origin", "recheck": true}`.
A process ignores its own messages: its followers had the events at once, from its bus.

Besides the session channels, a process with a lease owner name listens on its own control
channel (`<prefix>:control:<owner>`, subscribed as long as the subscription is up) for
`{"origin", "cancel": <turn>, "session_id"}`: another process recorded a cancel request for a
turn this one runs (`app.conversation.cancels`). The message only says "look now": the request
itself is in the database, and a lost message costs a sweep's delay.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio.client import PubSub
from redis.exceptions import RedisError

from app.conversation.bus import EventBus
from app.events import EventType
from app.observability.metrics import FanoutCounts
from app.resilience.redis_client import SharedRedis
from app.storage.records import Event, dumps

log = logging.getLogger(__name__)

_OUTBOX = 10_000  # messages waiting for Redis; beyond that a session is only told to recheck
_BATCH = 200  # messages per pipelined round trip
_FLUSH_S = 1.0  # at shutdown, how long the last messages may take to leave
_ERRORS = (RedisError, OSError)  # OSError covers TimeoutError


def channel(prefix: str, session_id: str) -> str:
    return f"{prefix}:events:{session_id}"


def control_channel(prefix: str, owner: str) -> str:
    """Where a process (by its lease owner name) hears what other processes ask of it."""
    return f"{prefix}:control:{owner}"


def encode_events(origin: str, events: list[Event]) -> str:
    rows = [
        {
            "session_id": e.session_id,
            "seq": e.seq,
            "tenant_id": e.tenant_id,
            "turn_id": e.turn_id,
            "type": str(e.type),
            "data": dumps(e.data),
            "created_at": e.created_at,
        }
        for e in events
    ]
    return json.dumps({"origin": origin, "events": rows}, ensure_ascii=False)


def decode_events(rows: list[dict[str, Any]]) -> list[Event]:
    return [
        Event(
            session_id=row["session_id"],
            seq=row["seq"],
            tenant_id=row["tenant_id"],
            type=EventType(row["type"]),
            data=json.loads(row["data"]),
            turn_id=row["turn_id"],
            created_at=row["created_at"],
        )
        for row in rows
    ]


class RedisFanout:
    """The bus's relay to and from other processes (see the module docstring).

    `start()` never fails on Redis: unreachable at first or later, followers here poll the
    database until the subscription is back (one warning per outage, one note when it ends).
    """

    def __init__(
        self,
        bus: EventBus,
        shared: SharedRedis,
        *,
        owner: str | None = None,
        poll_s: float = 0.25,
        retry_s: float = 0.5,
        timeout_s: float = 2.0,
    ) -> None:
        self.origin = uuid.uuid4().hex
        self._bus = bus
        self._prefix = shared.prefix
        # This process's control channel, and what it does when told a cancel is requested.
        self._control = None if owner is None else control_channel(shared.prefix, owner)
        self.on_cancel: Callable[[], None] | None = None
        self._poll_s = poll_s
        self._retry_s = retry_s
        # The process's one Redis client and pool (its owner closes it): publishing borrows a
        # pooled connection, the subscription holds one of its own for as long as it lasts.
        # Its timeouts are short and it retries once at most, so a failure surfaces here and
        # followers poll instead of waiting; `timeout_s` bounds each round trip on top.
        self._redis = shared.client
        self._timeout_s = timeout_s
        self._outbox: asyncio.Queue[tuple[str, str]] = asyncio.Queue(_OUTBOX)
        self._unsent: set[str] = set()  # sessions whose messages were dropped: recheck later
        self._publishing = True
        self._watched: set[str] = set()
        self._confirmed: set[str] = set()
        self._changed = asyncio.Event()
        # The subscription connection is up / down (down until it first connects: poll).
        self._up = asyncio.Event()
        self._down = asyncio.Event()
        self._down.set()
        self._broken: set[str] = set()  # "publish", "subscribe": for one warning per outage
        self._tasks: list[asyncio.Task[None]] = []
        # Messages published; from other processes delivered here; our own ones heard back.
        self.published = 0
        self.received = 0
        self.echoes = 0
        self._polled_s = 0.0  # finished outages (the subscription down), in seconds
        self._down_since: float | None = time.monotonic()

    # -- state ----------------------------------------------------------------------------------

    @property
    def live(self) -> bool:
        """Events of other processes arrive from Redis (not by polling the database)."""
        return self._up.is_set()

    def counts(self) -> FanoutCounts:
        """For /metrics: messages out and in, and time spent polling the database."""
        polling_s = self._polled_s
        if self._down_since is not None:
            polling_s += time.monotonic() - self._down_since
        return FanoutCounts(self.published, self.received, not self.live, polling_s)

    def subscribed(self) -> set[str]:
        """Sessions whose channel Redis has confirmed: their events arrive live from now on."""
        return set(self._confirmed) if self.live else set()

    def _lost(self, part: str, exc: BaseException) -> None:
        if not self._broken:
            log.warning(
                "Redis unreachable (%s: %s): live events of other processes now come from"
                " polling the database",
                part,
                type(exc).__name__,
            )
        self._broken.add(part)

    def _back(self, part: str) -> None:
        was_broken = bool(self._broken)
        self._broken.discard(part)
        if was_broken and not self._broken:
            log.info("Redis is back: live event fan-out resumed")

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        self._bus.attach(self)
        for work, name in (
            (self._publisher(), "fanout-publisher"),
            (self._subscriber(), "fanout-subscriber"),
            (self._poller(), "fanout-poller"),
        ):
            self._tasks.append(asyncio.create_task(work, name=name))

    async def aclose(self) -> None:
        # The last events (e.g. a turn cancelled at shutdown) should still reach other followers.
        if self._publishing:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_FLUSH_S):
                    await self._outbox.join()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    # -- out: the Relay side the bus calls ------------------------------------------------------

    def send(self, events: list[Event]) -> None:
        by_session: dict[str, list[Event]] = {}
        for event in events:
            by_session.setdefault(event.session_id, []).append(event)
        for session_id, batch in by_session.items():
            self._queue(session_id, encode_events(self.origin, batch))

    def send_close(self, session_id: str) -> None:
        self._queue(session_id, json.dumps({"origin": self.origin, "closed": True}))

    def _queue(self, session_id: str, message: str) -> None:
        if not self._publishing:
            self._unsent.add(session_id)
            return
        try:
            self._outbox.put_nowait((session_id, message))
        except asyncio.QueueFull:
            self._unsent.add(session_id)

    async def _publisher(self) -> None:
        while True:
            batch = [await self._outbox.get()]
            while len(batch) < _BATCH and not self._outbox.empty():
                batch.append(self._outbox.get_nowait())
            try:
                await self._publish(batch)
            except _ERRORS as exc:
                self._lost("publish", exc)
                self._publishing = False
                self._unsent.update(session_id for session_id, _ in batch)
                while not self._outbox.empty():
                    self._unsent.add(self._outbox.get_nowait()[0])
                    self._outbox.task_done()
                await self._publish_again()
                self._publishing = True
                self._back("publish")
            finally:
                for _ in batch:
                    self._outbox.task_done()

    async def _publish(self, batch: list[tuple[str, str]]) -> None:
        async with asyncio.timeout(self._timeout_s):
            async with self._redis.pipeline(transaction=False) as pipe:
                for session_id, message in batch:
                    pipe.publish(channel(self._prefix, session_id), message)
                await _shielded(pipe.execute())
        self.published += len(batch)

    async def _publish_again(self) -> None:
        """Wait until Redis takes messages again, then tell every session whose messages were
        dropped meanwhile to recheck the log (their followers elsewhere may have missed some)."""
        while True:
            await asyncio.sleep(self._retry_s)
            unsent, self._unsent = self._unsent, set()
            recheck = json.dumps({"origin": self.origin, "recheck": True})
            try:
                await self._publish([(session_id, recheck) for session_id in sorted(unsent)])
                return
            except _ERRORS:
                self._unsent |= unsent

    # -- in: other processes' events ------------------------------------------------------------

    def watch(self, session_id: str) -> None:
        self._watched.add(session_id)
        self._changed.set()

    def unwatch(self, session_id: str) -> None:
        self._watched.discard(session_id)
        self._changed.set()

    async def _subscriber(self) -> None:
        while True:
            pubsub = self._redis.pubsub()
            try:
                async with asyncio.timeout(self._timeout_s):
                    await pubsub.connect()  # type: ignore[no-untyped-call]
                if self._control is not None:
                    await _shielded(pubsub.subscribe(self._control))
                self._set_subscribed(True)
                self._back("subscribe")
                async with asyncio.TaskGroup() as group:
                    group.create_task(self._read(pubsub))
                    group.create_task(self._follow_watched(pubsub))
            except Exception as exc:
                cause = _first(exc)
                if not isinstance(cause, _ERRORS):
                    log.error("event subscription failed", exc_info=cause)  # retried all the same
                self._lost("subscribe", cause)
            finally:
                self._set_subscribed(False)
                self._confirmed.clear()
                with contextlib.suppress(*_ERRORS):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]
            await asyncio.sleep(self._retry_s)

    def _set_subscribed(self, up: bool) -> None:
        if up:
            self._down.clear()
            self._up.set()
            if self._down_since is not None:
                self._polled_s += time.monotonic() - self._down_since
                self._down_since = None
        else:
            self._up.clear()
            self._down.set()
            if self._down_since is None:
                self._down_since = time.monotonic()

    async def _follow_watched(self, pubsub: PubSub) -> None:
        """Keep the connection subscribed to the channels of the sessions followed here."""
        subscribed: set[str] = set()
        while True:
            self._changed.clear()
            wanted = set(self._watched)
            if added := wanted - subscribed:
                channels = (channel(self._prefix, s) for s in sorted(added))
                await _shielded(pubsub.subscribe(*channels))
            if dropped := subscribed - wanted:
                await _shielded(
                    pubsub.unsubscribe(*(channel(self._prefix, s) for s in sorted(dropped)))
                )
            subscribed = wanted
            await self._changed.wait()

    async def _read(self, pubsub: PubSub) -> None:
        start = len(channel(self._prefix, ""))
        while True:
            message = await pubsub.get_message(timeout=None)
            if message is None:
                continue
            name = _text(message["channel"])
            if name == self._control:
                if message["type"] == "message":
                    self._control_message(message["data"])
                continue
            session_id = name[start:]
            if message["type"] == "subscribe":
                # From here on nothing is missed; what came before is in the log.
                self._confirmed.add(session_id)
                self._bus.recheck(session_id)
            elif message["type"] == "unsubscribe":
                self._confirmed.discard(session_id)
            elif message["type"] == "message":
                self._deliver(session_id, message["data"])

    def _deliver(self, session_id: str, raw: str | bytes) -> None:
        try:
            message = json.loads(raw)
            if message.get("origin") == self.origin:
                self.echoes += 1
                return
            if "events" in message:
                self._bus.deliver(decode_events(message["events"]))
            elif message.get("closed"):
                self._bus.deliver_close(session_id)
            else:
                self._bus.recheck(session_id)
        except (ValueError, KeyError, TypeError):
            # Not ours or damaged: the log still has whatever it announced.
            log.warning("unreadable event message on %s", session_id)
            self._bus.recheck(session_id)
            return
        self.received += 1

    # -- control: what other processes ask of this one -----------------------------------------

    async def cancel_requested(self, owner: str, session_id: str, turn_id: str) -> None:
        """Tell `owner` (a lease owner) that a turn it runs has a cancel request (the
        `CancelSignal` of `app.conversation.cancels`). Raises when Redis does not take it."""
        message = json.dumps({"origin": self.origin, "cancel": turn_id, "session_id": session_id})
        async with asyncio.timeout(self._timeout_s):
            await _shielded(self._redis.publish(control_channel(self._prefix, owner), message))
        self.published += 1

    def _control_message(self, raw: str | bytes) -> None:
        try:
            message = json.loads(raw)
            wanted = isinstance(message, dict) and "cancel" in message
        except ValueError:
            wanted = False
        if not wanted:
            log.warning("unreadable control message")
            return
        self.received += 1
        if self.on_cancel is not None:
            self.on_cancel()

    async def _poller(self) -> None:
        """While the subscription is down, followers here recheck the log every `poll_s`."""
        while True:
            await self._down.wait()
            for session_id in self._bus.sessions():
                self._bus.recheck(session_id)
            await asyncio.sleep(self._poll_s)


async def _shielded(work: Awaitable[Any]) -> Any:
    """Await a Redis call so that cancelling the caller always works: cancelled in the middle
    of a command, redis-py (8.1, Python 3.11) can leave the awaiting task hanging for good. The
    call itself finishes (or fails) on its own; its outcome is then dropped."""
    task = asyncio.ensure_future(work)
    task.add_done_callback(_drop_outcome)
    return await asyncio.shield(task)


def _drop_outcome(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _text(value: str | bytes) -> str:
    """A channel name as text (the shared client does not decode replies)."""
    return value.decode() if isinstance(value, bytes) else value


def _first(exc: BaseException) -> BaseException:
    """The first real error inside (task) groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
