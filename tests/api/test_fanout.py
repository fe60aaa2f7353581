"""Two live services sharing one database and one Redis: a browser on B follows a turn that runs
on A, every event once and in order, byte for byte what a replay from the log sends.

`shared_settings` is the one place that says what the two processes share (today one SQLite
file; parametrise it for PostgreSQL)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.conversation.fanout import RedisFanout
from app.llm.testing import FakeLLMServer, Reply
from app.settings import Settings
from app.testing import LiveService, SseEvent, read_events, serve
from tests.conftest import assert_exactly_once, new_session, replay_of, reply_shown
from tests.redis_util import REDIS_URL, proxied_redis, redis_prefix  # noqa: F401 (a fixture)

WORDS = " ".join(f"w{i}" for i in range(16))


@pytest.fixture
def shared_settings(make_settings: Any, redis_prefix: str) -> Settings:  # noqa: F811
    return make_settings(redis_url=REDIS_URL, redis_prefix=redis_prefix)


@pytest.fixture
async def two(shared_settings: Settings) -> AsyncIterator[tuple[LiveService, LiveService]]:
    async with serve(shared_settings) as a, serve(shared_settings) as b:
        yield a, b


async def fanout_metrics(client: httpx.AsyncClient) -> dict[str, float]:
    """The `hermes_fanout_*` samples a service's /metrics shows."""
    text = (await client.get("/metrics")).text
    found = re.findall(r"^(hermes_fanout_\w+) (\S+)$", text, re.MULTILINE)
    return {name: float(value) for name, value in found}


async def collect(svc: LiveService, session_id: str, **headers: str) -> list[SseEvent]:
    async with svc.client.stream(
        "GET", f"/v1/sessions/{session_id}/events", headers=headers
    ) as response:
        assert response.status_code == 200
        return [e async for e in read_events(response, until="turn.completed")]


async def test_a_follower_on_b_gets_a_turn_running_on_a(
    two: tuple[LiveService, LiveService], fake_llm: FakeLLMServer
) -> None:
    a, b = two
    fake_llm.enqueue(Reply(WORDS, chunks=16, chunk_delay=0.03))
    session_id = await new_session(a)
    before = await fanout_metrics(b.client)
    async with b.client.stream(
        "GET", f"/v1/sessions/{session_id}/events", params={"after": 1}
    ) as response:
        assert response.status_code == 200
        posted = await a.client.post(f"/v1/sessions/{session_id}/messages", json={"content": "go"})
        assert posted.status_code == 200, posted.text
        live = [e async for e in read_events(response, until="turn.completed")]
    # (One registry for both services in this process: the counts are A's and B's together.)
    after = await fanout_metrics(b.client)
    published = after["hermes_fanout_published_total"] - before["hermes_fanout_published_total"]
    received = after["hermes_fanout_received_total"] - before["hermes_fanout_received_total"]
    assert 0 < received <= published  # B heard A's messages; A follows nothing
    assert after["hermes_fanout_polling"] == 0
    ids = [int(e.id or 0) for e in live]
    assert ids == list(range(2, 2 + len(ids))), "a gap or a duplicate"
    assert "".join(e.data["text"] for e in live if e.event == "message.delta") == WORDS
    replayed = await collect(a, session_id, **{"Last-Event-ID": "1"})
    # the finished turn replays without the events its end deleted, the rest byte for byte
    assert replay_of(live) == [(e.id, e.event, e.data) for e in replayed]
    assert [e.raw for e in replayed] == [e.raw for e in live if e.id in {r.id for r in replayed}]


async def test_resume_on_b_in_the_middle_of_a_turn_on_a(
    two: tuple[LiveService, LiveService], fake_llm: FakeLLMServer
) -> None:
    a, b = two
    fake_llm.enqueue(Reply(WORDS, chunks=16, chunk_delay=0.05))
    session_id = await new_session(a)
    seen: list[SseEvent] = []
    async with a.client.stream(
        "POST",
        f"/v1/sessions/{session_id}/messages",
        json={"content": "go"},
        headers={"Accept": "text/event-stream"},
    ) as response:
        async for event in read_events(response):
            seen.append(event)
            if sum(e.event == "message.delta" for e in seen) == 3:
                break  # the tab drops; it reconnects to the other process
    last = seen[-1].id
    assert last is not None
    resumed = await collect(b, session_id, **{"Last-Event-ID": last})
    assert_exactly_once(seen + resumed, await collect(a, session_id, **{"Last-Event-ID": "1"}))
    assert reply_shown(seen + resumed) == WORDS


async def test_redis_cut_mid_turn_b_polls_then_goes_live_again(
    make_settings: Any,
    redis_prefix: str,  # noqa: F811
    fake_llm: FakeLLMServer,
) -> None:
    words = " ".join(f"w{i}" for i in range(30))
    fake_llm.enqueue(Reply(words, chunks=30, chunk_delay=0.05))
    async with proxied_redis() as (proxy, url):
        settings = make_settings(redis_url=url, redis_prefix=redis_prefix)
        async with serve(settings) as a, serve(settings) as b:
            fanout = b.runtime.bus.relay
            assert isinstance(fanout, RedisFanout)
            session_id = await new_session(a)
            events: list[SseEvent] = []
            async with b.client.stream(
                "GET", f"/v1/sessions/{session_id}/events", params={"after": 1}
            ) as response:
                poster = asyncio.create_task(
                    a.client.post(f"/v1/sessions/{session_id}/messages", json={"content": "go"})
                )
                deltas = 0
                async for event in read_events(response, until="turn.completed"):
                    events.append(event)
                    deltas += event.event == "message.delta"
                    if deltas == 3:
                        await proxy.cut()
                    if deltas == 8:
                        assert not fanout.live  # these came by polling the log
                        cut = await fanout_metrics(b.client)
                        assert cut["hermes_fanout_polling"] >= 1
                        await proxy.restore()
                assert (await poster).status_code == 200
            assert events[0].id == "2"
            assert_exactly_once(events, await collect(a, session_id, **{"Last-Event-ID": "1"}))
            assert reply_shown(events) == words  # deltas polled after the end are gone
            fanouts = [a.runtime.fanout, fanout]
            async with asyncio.timeout(10):
                while not all(f is not None and f.live for f in fanouts):  # noqa: ASYNC110
                    await asyncio.sleep(0.01)  # (another component's state)
            back = await fanout_metrics(b.client)
            assert back["hermes_fanout_polling"] == 0  # A's and B's, one registry
            polled = "hermes_fanout_polling_seconds_total"
            assert back[polled] > cut[polled]  # the outage counted until its end
