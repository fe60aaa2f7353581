"""RedisFanout: two buses in one process stand for two processes sharing one database log and one
Redis. A follower on bus B gets what is committed through bus A, exactly once and in order,
live through Redis; with Redis cut it gets the same by polling the log, and live again after.
Real SQLite log, real Redis (through a TCP proxy that can cut it), no HTTP."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from app.conversation.bus import EventBus, Follower
from app.conversation.fanout import RedisFanout
from app.events import EventType
from app.resilience.redis_client import SharedRedis
from app.storage.event_log import EventStore
from app.storage.port import Database
from app.storage.records import Event
from app.storage.session_writer import SessionWriter
from app.storage.sessions import SessionStore
from app.storage.tx import Store, Tx
from tests.redis_util import TcpProxy, proxied_url, redis_prefix, redis_proxy  # noqa: F401 (a fixture)

TENANT = "default"
DEADLINE_S = 10.0


async def until(condition: Callable[[], bool], what: str) -> None:
    async with asyncio.timeout(DEADLINE_S):
        while not condition():  # noqa: ASYNC110 (state of another component, no event to await)
            await asyncio.sleep(0.01)
    assert condition(), what


@dataclass
class Node:
    """One "process": its bus, its fan-out (to Redis through its own proxy), a store that
    commits and publishes through the bus."""

    bus: EventBus
    fanout: RedisFanout
    store: Store
    proxy: TcpProxy
    shared: SharedRedis


class CountingLog:
    """The event log, counting its reads."""

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self.reads = 0

    async def after(self, session_id: str, after_seq: int, limit: int = 500) -> list[Event]:
        self.reads += 1
        return await self.store.after(session_id, after_seq, limit)

    async def exists(self, session_id: str) -> bool:
        return await self.store.exists(session_id)


@dataclass
class Pair:
    db: Database
    prefix: str
    log: CountingLog
    nodes: list[Node]
    session_id: str = ""

    @property
    def a(self) -> Node:
        return self.nodes[0]

    @property
    def b(self) -> Node:
        return self.nodes[1]

    async def add_node(self, *, cut: bool = False) -> Node:
        """Another process; with `cut`, Redis is unreachable when it starts."""
        proxy = redis_proxy()
        port = await proxy.start()
        if cut:
            await proxy.cut()
        bus = EventBus()
        shared = SharedRedis(proxied_url(port), self.prefix)
        fanout = RedisFanout(bus, shared, poll_s=0.05, retry_s=0.05)
        await fanout.start()
        node = Node(bus, fanout, Store(self.db, bus.publish), proxy, shared)
        self.nodes.append(node)
        return node

    async def commit(self, node: Node, *labels: str) -> list[int]:
        """One `message.delta` per label, in one transaction committed through `node`."""

        def emit(tx: Tx) -> list[int]:
            return [
                tx.emit(self.session_id, TENANT, EventType.MESSAGE_DELTA, {"text": label}).seq
                for label in labels
            ]

        return await node.store.transact(SessionWriter(self.session_id), emit)

    def follow(self, node: Node, after: int) -> Follower:
        return Follower(node.bus, self.log, self.session_id, after=after, keepalive_s=DEADLINE_S)


@pytest.fixture
async def pair(open_db: Any, redis_prefix: str) -> AsyncIterator[Pair]:  # noqa: F811
    db = await open_db("events.db")  # SQLite, or PostgreSQL when the backend is parametrised
    pair = Pair(db, redis_prefix, CountingLog(EventStore(db)), [])
    try:
        a = await pair.add_node()
        await pair.add_node()
        pair.session_id = (await SessionStore(db, a.bus.publish).create(TENANT, "u1", {})).id
        yield pair  # the session's first event (seq 1) is session.created
    finally:
        for node in pair.nodes:
            await node.fanout.aclose()
            await node.shared.aclose()
            await node.proxy.close()


async def take(follower: Follower, n: int) -> list[Event]:
    events = []
    async with asyncio.timeout(DEADLINE_S):
        for _ in range(n):
            event = await anext(follower)
            assert isinstance(event, Event), "a keep-alive tick instead of an event"
            events.append(event)
    return events


async def live(pair: Pair, node: Node) -> None:
    await until(lambda: pair.session_id in node.fanout.subscribed(), "never subscribed")


async def test_a_follower_on_b_gets_what_a_commits_live_once_and_as_stored(pair: Pair) -> None:
    follower = pair.follow(pair.b, after=1)
    own = pair.follow(pair.a, after=1)  # A follows too: it ignores its own echoes
    try:
        await live(pair, pair.b)
        await live(pair, pair.a)
        # Past the first catch-up from the log and the recheck the subscription asked for.
        for label in ("warm-up 1", "warm-up 2"):
            warm_up = await pair.commit(pair.a, label)
            assert [e.seq for e in await take(follower, 1)] == warm_up
            assert [e.seq for e in await take(own, 1)] == warm_up
        reads, received = pair.log.reads, pair.b.fanout.received

        seen = asyncio.ensure_future(take(follower, 3))
        seqs = await pair.commit(pair.a, "a", "b")
        seqs += await pair.commit(pair.a, "c")
        assert [e.seq for e in await seen] == seqs
        assert pair.log.reads == reads, "read from the log, not received live"
        assert pair.b.fanout.received >= received + 2  # one message per commit (and warm-ups)
        assert await seen == await pair.log.after(pair.session_id, warm_up[0]), "not as stored"
        assert [e.seq for e in await take(own, 3)] == seqs
        # Its own messages (session.created may be one) came back and were dropped.
        await until(lambda: pair.a.fanout.echoes >= 4, "A never heard its messages back")
        assert pair.a.fanout.received == 0
    finally:
        await follower.aclose()
        await own.aclose()
    # The last follower gone, B leaves the channel.
    await until(lambda: not pair.b.fanout.subscribed(), "still subscribed")


async def test_events_committed_before_the_subscription_is_confirmed_come_from_the_log(
    pair: Pair,
) -> None:
    await pair.commit(pair.a, "early")  # 2: before anyone follows
    follower = pair.follow(pair.b, after=1)
    try:
        # Right after subscribing, before Redis confirmed: published where B does not listen yet.
        late = await pair.commit(pair.a, "racing")
        assert [e.seq for e in await take(follower, 2)] == [2, *late]
    finally:
        await follower.aclose()


async def test_with_redis_cut_b_polls_the_log_then_goes_live_again(
    pair: Pair, caplog: pytest.LogCaptureFixture
) -> None:
    follower = pair.follow(pair.b, after=1)
    try:
        await live(pair, pair.b)
        first = await pair.commit(pair.a, "before")
        assert [e.seq for e in await take(follower, 1)] == first

        with caplog.at_level(logging.WARNING, logger="app.conversation.fanout"):
            await pair.a.proxy.cut()
            await pair.b.proxy.cut()
            await until(lambda: not pair.b.fanout.live, "B did not notice")
            during = []
            for label in ("cut-1", "cut-2", "cut-3"):
                during += await pair.commit(pair.a, label)  # A cannot publish these
            assert [e.seq for e in await take(follower, 3)] == during
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 2, [r.getMessage() for r in warnings]  # one per process
        received = pair.b.fanout.received

        await pair.a.proxy.restore()
        await pair.b.proxy.restore()
        await live(pair, pair.b)
        after = await pair.commit(pair.a, "after")
        assert [e.seq for e in await take(follower, 1)] == after
        await until(lambda: pair.b.fanout.received > received, "not live again")
    finally:
        await follower.aclose()
    assert [e.seq for e in await pair.log.after(pair.session_id, 1)] == [
        *first,
        *during,
        *after,
    ]


async def test_what_a_could_not_publish_reaches_b_when_redis_is_back_for_a(pair: Pair) -> None:
    """Only A loses Redis: B keeps its subscription (no polling), so A, once back, tells the
    sessions whose messages it dropped to read the log."""
    follower = pair.follow(pair.b, after=1)
    try:
        await live(pair, pair.b)
        await pair.a.proxy.cut()
        lost = await pair.commit(pair.a, "the last event of a turn")
        assert pair.b.fanout.live
        await pair.a.proxy.restore()
        assert [e.seq for e in await take(follower, 1)] == lost
    finally:
        await follower.aclose()


async def test_unreachable_at_start_it_polls_until_redis_comes(pair: Pair) -> None:
    c = await pair.add_node(cut=True)
    follower = pair.follow(c, after=1)
    try:
        polled = await pair.commit(pair.a, "polled")
        assert [e.seq for e in await take(follower, 1)] == polled
        assert not c.fanout.live
        await c.proxy.restore()
        await live(pair, c)
        pushed = await pair.commit(pair.a, "pushed")
        assert [e.seq for e in await take(follower, 1)] == pushed
        await until(lambda: c.fanout.received > 0, "not live")
    finally:
        await follower.aclose()
