"""A real Redis restart under two `hermes serve` processes (A, B) on one PostgreSQL database and
one Redis of the test's own, killed (SIGKILL) and started again, empty, on the same port: every
connection the processes pooled dies with it.

- While it is down both processes say `degraded`, every turn still runs and a follower on B of
  a turn on A gets every event (from the log, by polling).
- Once it answers again, health is `ok` on both within about a second and stays `ok`, and the
  first calls on the dead pooled connections succeed: under bursts of turns (each takes a slot
  of the turn rate from Redis) no process logs a new Redis failure. Before, each dead
  connection surfaced as one when a burst first took it from the pool: another outage, a
  second of `degraded` health and of per-process limits, long after Redis was back.
- Both subscriptions came back: a follower on B gets a turn on A live (received from Redis, not
  polled), and a cancel sent to B reaches the turn on A through A's control channel (the lease
  sweep that would find it otherwise runs once a minute here).

The rate limits while Redis is away are in tests/api/test_budgets.py."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest
import redis

from app.llm.testing import Reply
from app.runtime import REDIS_DEGRADED
from app.testing import SseEvent, read_events
from tests.api.test_fanout import fanout_metrics
from tests.conftest import assert_exactly_once
from tests.redis_util import RedisServer
from tests.test_scale_out import Cluster, _cancel_elsewhere, _new_session, _post, start_cluster

pytestmark = pytest.mark.slow

BURST = 6  # turns at once per process: enough to hold several pooled connections
FAILED = "Redis (HERMES_REDIS_URL) failed"  # the warning that starts an outage


def test_after_a_redis_restart_both_processes_recover_at_once(
    tmp_path: Path, demo_template: Path
) -> None:
    with (
        RedisServer(tmp_path / "redis") as server,
        start_cluster(
            tmp_path,
            demo_template,
            "ab",
            HERMES_REDIS_URL=server.url,
            # Every turn takes a slot of the turn rate in Redis (never refused at this rate).
            HERMES_TURN_RATE_PER_MINUTE="100000",
            # A cancel recorded on B ends the turn on A only if A's control channel tells it.
            HERMES_SESSION_LEASE_SWEEP_S="60",
            HERMES_CANCEL_WAIT_S="10",
        ) as pair,
    ):
        logs = [tmp_path / "a.log", tmp_path / "b.log"]
        asyncio.run(_restart(pair, server, logs))


async def _restart(pair: Cluster, server: RedisServer, logs: list[Path]) -> None:
    async with (
        httpx.AsyncClient(base_url=pair.bases[0], timeout=30) as a,
        httpx.AsyncClient(base_url=pair.bases[1], timeout=30) as b,
    ):
        both = (a, b)
        await _health_until(both, "ok")
        await _bursts(pair, both, 2)
        # The pools hold idle connections besides the two subscriptions: they die with Redis.
        assert _clients(server) > 3

        server.kill()
        await _health_until(both, REDIS_DEGRADED)
        await _bursts(pair, both, 1)  # turns run without Redis
        await _followed_on_b(pair, a, b)  # by polling the log

        failures = [_count(log, FAILED) for log in logs]
        server.start()
        back = time.monotonic()
        await _health_until(both, "ok")
        assert time.monotonic() - back < 2.5, "health stayed degraded after Redis was back"

        degraded: list[str] = []
        watch = asyncio.create_task(_health_samples(both, back, degraded))
        try:
            await _bursts(pair, both, 4)
        finally:
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)
        # Each dead pooled connection used to be a new outage: a failure logged, health
        # `degraded` and limits per process for a second.
        outages = [_count(log, FAILED) - n for log, n in zip(logs, failures, strict=True)]
        assert (outages, degraded) == ([0, 0], []), "a dead pooled connection failed a call"

        before = await fanout_metrics(b)
        await _followed_on_b(pair, a, b)
        after = await fanout_metrics(b)
        assert after["hermes_fanout_received_total"] > before["hermes_fanout_received_total"]
        assert after["hermes_fanout_polling"] == 0, "B's subscription is not back"
        await _cancel_elsewhere(pair, a, b)  # A's control channel is subscribed again


async def _bursts(pair: Cluster, clients: tuple[httpx.AsyncClient, ...], n: int) -> None:
    """`n` rounds of BURST turns at once on each process, each in a session of its own."""
    for _ in range(n):
        pair.llm.enqueue(*(Reply("fine") for _ in range(BURST * len(clients))))
        sessions = [(c, await _new_session(c)) for c in clients for _ in range(BURST)]
        answers = await asyncio.gather(*(_post(c, s, "hello") for c, s in sessions))
        assert [r.status_code for r in answers] == [200] * len(sessions), [
            r.text for r in answers if r.status_code != 200
        ]


async def _followed_on_b(pair: Cluster, a: httpx.AsyncClient, b: httpx.AsyncClient) -> None:
    """A turn posted to A, followed on B from the session's start: every event, once, in order,
    as a replay from the log has it."""
    words = " ".join(f"w{i}" for i in range(8))
    pair.llm.enqueue(Reply(words, chunks=8, chunk_delay=0.02))
    session_id = await _new_session(a)
    url = f"/v1/sessions/{session_id}/events"
    async with b.stream("GET", url, params={"after": 1}) as followed:
        assert followed.status_code == 200
        posted = await _post(a, session_id, "go")
        assert posted.status_code == 200, posted.text
        async with asyncio.timeout(30):
            live = [e async for e in read_events(followed, until="turn.completed")]
    async with a.stream("GET", url, headers={"Last-Event-ID": "1"}) as replay:
        stored = [e async for e in read_events(replay, until="turn.completed")]
    assert live[0].id == "2"
    assert_exactly_once(live, stored)
    assert _final(live) == _final(stored) == words


async def _health_until(clients: tuple[httpx.AsyncClient, ...], redis_check: str) -> None:
    async with asyncio.timeout(15):
        while True:
            checks = [(await c.get("/healthz")).json()["checks"]["redis"] for c in clients]
            if all(check == redis_check for check in checks):
                return
            await asyncio.sleep(0.02)


async def _health_samples(
    clients: tuple[httpx.AsyncClient, ...], since: float, degraded: list[str]
) -> None:
    """Until cancelled: /healthz of every process every 20 ms; what is not `ok` goes to
    `degraded` (seconds after `since`, which process, its check)."""
    while True:
        for client in clients:
            check = (await client.get("/healthz")).json()["checks"]["redis"]
            if check != "ok":
                degraded.append(f"{time.monotonic() - since:.2f}s {client.base_url}: {check}")
        await asyncio.sleep(0.02)


def _final(events: list[SseEvent]) -> str:
    (text,) = [e.data["text"] for e in events if e.event == "message.completed"]
    return str(text)


def _clients(server: RedisServer) -> int:
    with redis.Redis.from_url(server.url) as client:
        return int(client.info("clients")["connected_clients"]) - 1  # less this one


def _count(log: Path, text: str) -> int:
    return log.read_text(encoding="utf-8").count(text)
