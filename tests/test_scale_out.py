"""Three `hermes serve` processes (A, B, C) on one PostgreSQL database and one Redis key prefix,
driven over HTTP only, as a load balancer would spread a call centre's browsers over replicas:

- a browser following a session on B sees the deltas of a turn running on A while it runs;
- a browser that reconnects to C with `Last-Event-ID` in the middle of that turn gets exactly
  the events after that id, then the rest live, through `turn.completed`;
- messages posted to one session through A, B and C at the same moment: the busy policy
  (`reject`, the default) accepts one and answers 409 `session_busy` to the others, and exactly
  one model call runs;
- the session's lease row names the one process that ran its turns;
- with the busy policy `enqueue`, messages posted through two processes at once are all
  accepted and run one after the other, in the order they were accepted, by one owner;
- a cancel sent to B ends the turn running on A (its stream on A gets `turn.failed`,
  `cancelled`), with Redis and without it (then A finds the request within a lease sweep).

The processes are started once for the module (each start costs a couple of seconds); every
test works on sessions of its own. The fake model's `Gate` holds a reply half-way, so "in
flight" is a state the test controls, not a race it hopes to win."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest

from app.llm.testing import FakeLLMServer, Gate, Reply
from app.testing import SseEvent, read_events
from tests.api.test_cancel import assert_cancelled
from tests.api.test_fanout import fanout_metrics
from tests.conftest import copy_demo
from tests.postgres import fresh_database
from tests.redis_util import REDIS_URL, key_prefix
from tests.serve_util import free_port, hermes_env, spawn_hermes, stop, wait_healthy

pytestmark = pytest.mark.slow

CHUNKS = [f"w{i:02d} " for i in range(12)]  # equal lengths: `chunks=12` splits here
HELD = 6  # pieces out before the fake model holds the reply


@dataclass
class Cluster:
    llm: FakeLLMServer
    database_url: str
    procs: list[subprocess.Popen[bytes]]
    bases: list[str]


@contextlib.contextmanager
def start_cluster(
    tmp: Path, demo_template: Path, names: str, *, redis: bool = True, **settings: str
) -> Iterator[Cluster]:
    """`hermes serve` per letter of `names` on one fresh database and Redis prefix (or no
    Redis at all)."""
    if redis:
        settings = {"HERMES_REDIS_URL": REDIS_URL, **settings}
    with FakeLLMServer() as llm, fresh_database() as url, key_prefix() as prefix:
        procs: list[subprocess.Popen[bytes]] = []
        bases: list[str] = []
        try:
            for name in names:
                port = free_port()
                env = hermes_env(
                    llm.url,
                    HERMES_DATABASE_URL=url,
                    HERMES_REDIS_PREFIX=prefix,
                    HERMES_LOCAL_FALLBACK="false",
                    # One delta event per streamed piece: the order is checkable piece by piece.
                    HERMES_DELTA_FLUSH_MS="0",
                    # (The demo dataset is one SQLite file per process.)
                    HERMES_DEMO_DB_PATH=str(copy_demo(demo_template, tmp / f"demo-{name}.db")),
                    **settings,
                )
                procs.append(spawn_hermes(["serve", "--port", str(port)], env, tmp / f"{name}.log"))
                bases.append(f"http://127.0.0.1:{port}")

            async def all_healthy() -> None:
                await asyncio.gather(
                    *(
                        wait_healthy(base, proc, tmp / f"{name}.log")
                        for base, proc, name in zip(bases, procs, names, strict=True)
                    )
                )

            asyncio.run(all_healthy())
            yield Cluster(llm, url, procs, bases)
        finally:
            stop(procs)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, demo_template: Path) -> Iterator[Cluster]:
    with start_cluster(tmp_path_factory.mktemp("scale-out"), demo_template, "abc") as started:
        yield started


@pytest.fixture
async def clients(cluster: Cluster) -> AsyncIterator[list[httpx.AsyncClient]]:
    cluster.llm.reset()
    opened = [httpx.AsyncClient(base_url=base, timeout=30) for base in cluster.bases]
    try:
        yield opened
    finally:
        for client in opened:
            await client.aclose()


async def test_a_follower_on_b_sees_a_turn_on_a_live_and_a_resume_on_c_gets_the_rest(
    cluster: Cluster, clients: list[httpx.AsyncClient]
) -> None:
    a, b, c = clients
    gate = Gate(after=HELD)
    cluster.llm.enqueue(Reply("".join(CHUNKS), chunks=len(CHUNKS), gate=gate))
    session_id = await _new_session(a)

    async with b.stream("GET", f"/v1/sessions/{session_id}/events") as on_b:
        assert on_b.status_code == 200
        followed_b = aiter(read_events(on_b))
        seen_b: list[SseEvent] = []
        posted = asyncio.create_task(_post(a, session_id, "go"))
        await _read(followed_b, seen_b, lambda seen: _deltas(seen) == CHUNKS[:HELD])

        # The model holds the reply: the turn cannot have finished, B had its deltas live.
        assert gate.reached and not posted.done()
        assert "turn.completed" not in [e.event for e in seen_b]
        assert await _running_steps(c, session_id) == ["generate_response"]
        owner, token, expires_at = await asyncio.to_thread(_lease, cluster, session_id)
        assert _pid(owner) == cluster.procs[0].pid and token == 1 and expires_at > time.time()
        _assert_consecutive(seen_b)

        # A browser on C resumes from the middle of what B got.
        middle = [e for e in seen_b if e.event == "message.delta"][HELD // 2]
        resume_id = int(middle.id or 0)
        async with c.stream(
            "GET", f"/v1/sessions/{session_id}/events", headers={"Last-Event-ID": str(resume_id)}
        ) as on_c:
            assert on_c.status_code == 200
            followed_c = aiter(read_events(on_c))
            seen_c: list[SseEvent] = []
            last_b = int(seen_b[-1].id or 0)
            await _read(followed_c, seen_c, lambda seen: int(seen[-1].id or 0) >= last_b)
            assert [int(e.id or 0) for e in seen_c] == list(range(resume_id + 1, last_b + 1))

            gate.open()  # the rest of the turn: live on B and on C
            await _read(followed_b, seen_b, _completed)
            await _read(followed_c, seen_c, _completed)

    answer = await posted
    assert answer.status_code == 200, answer.text
    _assert_consecutive(seen_b)
    assert _deltas(seen_b) == CHUNKS, "a delta missing, repeated or out of order"
    after_resume = [e for e in seen_b if int(e.id or 0) > resume_id]
    assert [(e.id, e.event, e.raw) for e in seen_c] == [
        (e.id, e.event, e.raw) for e in after_resume
    ], "the resume on C is not exactly the events after its Last-Event-ID"
    assert len(cluster.llm.requests) == 1
    owner, token = await _released(cluster, session_id)
    assert (_pid(owner), token) == (cluster.procs[0].pid, 1), "A ran it, the lease never moved"
    # Each process's own counts: A published the turn's events, B and C received them.
    published, received = "hermes_fanout_published_total", "hermes_fanout_received_total"
    assert (await fanout_metrics(a))[published] > 0
    assert (await fanout_metrics(b))[received] > 0 and (await fanout_metrics(c))[received] > 0


async def test_posts_to_one_session_through_every_process_at_once_run_one_turn(
    cluster: Cluster, clients: list[httpx.AsyncClient]
) -> None:
    pids = [proc.pid for proc in cluster.procs]
    for client in clients:  # connections open before the race, so the posts leave together
        health = (await client.get("/healthz")).json()
        assert health["checks"] == {"database": "ok", "redis": "ok"}, health
    for round_ in range(3):
        session_id = await _new_session(clients[0])
        gate = Gate(after=0)
        cluster.llm.enqueue(Reply(f"answer {round_}", gate=gate))
        contents = [f"round {round_} via {name}" for name in "ABC"]
        posts = [
            asyncio.ensure_future(_post(client, session_id, text))
            for client, text in zip(clients, contents, strict=True)
        ]
        # The accepted turn waits at its model until the other two posts have their answer:
        # they all arrive while it runs, however slowly this machine serves them.
        await _until_done(posts, 2)
        gate.open()
        answers = await asyncio.gather(*posts)

        statuses = [answer.status_code for answer in answers]
        assert sorted(statuses) == [200, 409, 409], [a.text for a in answers]
        assert all(
            a.json()["error"]["code"] == "session_busy" for a in answers if a.status_code == 409
        )
        accepted = statuses.index(200)
        assert answers[accepted].json()["message"]["content"] == f"answer {round_}"
        # Exactly one model call, for the accepted message; none for the rejected ones.
        asked = [_last_user_text(r.messages) for r in cluster.llm.requests]
        assert [t for t in asked if t in contents] == [contents[accepted]]
        stored = (await clients[2].get(f"/v1/sessions/{session_id}/messages")).json()["items"]
        assert [m["content"] for m in stored if m["role"] == "user"] == [contents[accepted]]
        # One owner: the process that accepted the message ran its turn, then let go.
        owner, token = await _released(cluster, session_id)
        assert (_pid(owner), token) == (pids[accepted], 1)
    assert all(proc.poll() is None for proc in cluster.procs)


def test_enqueued_posts_through_two_processes_run_in_order_on_one_owner(
    tmp_path: Path, demo_template: Path
) -> None:
    with start_cluster(tmp_path, demo_template, "ab", HERMES_BUSY_POLICY="enqueue") as pair:
        asyncio.run(_enqueue_through(pair))


async def _enqueue_through(pair: Cluster) -> None:
    async with (
        httpx.AsyncClient(base_url=pair.bases[0], timeout=30) as a,
        httpx.AsyncClient(base_url=pair.bases[1], timeout=30) as b,
    ):
        session_id = await _new_session(a)
        gate = Gate(after=0)
        pair.llm.enqueue(Reply("first answer", gate=gate), Reply("second"), Reply("third"))
        first = asyncio.ensure_future(_post(a, session_id, "one via A"))
        await _until_running(b, session_id)
        later = [
            asyncio.ensure_future(_post(b, session_id, "two via B")),
            asyncio.ensure_future(_post(a, session_id, "three via A")),
        ]
        await _until_accepted(b, session_id, 3)  # all three accepted while the first one runs
        gate.open()
        answers = await asyncio.gather(first, *later)

    assert [r.status_code for r in answers] == [200, 200, 200], [r.text for r in answers]
    replies = [r.json()["message"]["content"] for r in answers]
    asked = [_last_user_text(r.messages) for r in pair.llm.requests]
    assert asked[0] == "one via A" and sorted(asked[1:]) == ["three via A", "two via B"]
    # Each turn got the model's answers in the order the turns ran.
    assert replies[0] == "first answer"
    assert {replies[1], replies[2]} == {"second", "third"}
    by_question = dict(zip(["one via A", "two via B", "three via A"], replies, strict=True))
    assert [by_question[q] for q in asked] == ["first answer", "second", "third"]
    owner, token = await _released(pair, session_id)
    assert (_pid(owner), token) == (pair.procs[0].pid, 1), "one owner ran all three"


async def test_a_cancel_through_b_ends_the_turn_running_on_a(
    cluster: Cluster, clients: list[httpx.AsyncClient]
) -> None:
    a, b, _c = clients
    await _cancel_elsewhere(cluster, a, b)


def test_without_redis_a_cancel_through_b_ends_the_turn_running_on_a(
    tmp_path: Path, demo_template: Path
) -> None:
    with start_cluster(tmp_path, demo_template, "ab", redis=False) as pair:

        async def run() -> None:
            async with (
                httpx.AsyncClient(base_url=pair.bases[0], timeout=30) as a,
                httpx.AsyncClient(base_url=pair.bases[1], timeout=30) as b,
            ):
                health = (await a.get("/healthz")).json()
                assert "redis" not in health["checks"], health
                await _cancel_elsewhere(pair, a, b)

        asyncio.run(run())


async def _cancel_elsewhere(cluster: Cluster, a: httpx.AsyncClient, b: httpx.AsyncClient) -> None:
    """A turn held mid-reply on A, cancelled through B: ended on A as a local cancel ends it."""
    gate = Gate(after=HELD)
    cluster.llm.enqueue(Reply("".join(CHUNKS), chunks=len(CHUNKS), gate=gate))
    session_id = await _new_session(a)
    try:
        async with a.stream(
            "POST",
            f"/v1/sessions/{session_id}/messages",
            json={"content": "go"},
            headers={"Accept": "text/event-stream"},
        ) as on_a:
            assert on_a.status_code == 200
            events = aiter(read_events(on_a))
            seen: list[SseEvent] = []
            await _read(events, seen, lambda got: _deltas(got) == CHUNKS[:HELD])
            turn_id = seen[0].data["turn_id"]
            owner, _token, _expires = await asyncio.to_thread(_lease, cluster, session_id)
            assert _pid(owner) == cluster.procs[0].pid, "the turn runs on A"

            assert_cancelled(await b.post(f"/v1/sessions/{session_id}/cancel"), session_id, turn_id)
            await _read(events, seen, _ended)
        assert (seen[-1].event, seen[-1].data["code"]) == ("turn.failed", "cancelled")
        assert _deltas(seen) == CHUNKS[:HELD], "the reply went on after the cancel"
        for client in (a, b):
            gone = await client.post(f"/v1/sessions/{session_id}/cancel")
            assert gone.status_code == 409 and gone.json()["error"]["code"] == "no_running_turn"
    finally:
        gate.open()


async def _until_running(client: httpx.AsyncClient, session_id: str) -> None:
    deadline = time.monotonic() + 15
    while "generate_response" not in await _running_steps(client, session_id):
        assert time.monotonic() < deadline, "the first turn never started"
        await asyncio.sleep(0.05)


async def _until_accepted(client: httpx.AsyncClient, session_id: str, n: int) -> None:
    """Until `n` customer messages are stored (a message is stored when its turn is accepted)."""
    deadline = time.monotonic() + 15
    while True:
        stored = (await client.get(f"/v1/sessions/{session_id}/messages")).json()["items"]
        users = [m for m in stored if m["role"] == "user"]
        if len(users) >= n:
            return
        assert time.monotonic() < deadline, f"only {len(users)} messages accepted"
        await asyncio.sleep(0.05)


# -- helpers ------------------------------------------------------------------------------------


async def _new_session(client: httpx.AsyncClient) -> str:
    response = await client.post("/v1/sessions", json={"user_id": "u1"})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def _post(client: httpx.AsyncClient, session_id: str, content: str) -> httpx.Response:
    return await client.post(f"/v1/sessions/{session_id}/messages", json={"content": content})


async def _until_done(tasks: list[asyncio.Future[httpx.Response]], n: int) -> None:
    """Until `n` of `tasks` are done (or 15 s went by: the assertions after say what happened)."""
    deadline = time.monotonic() + 15
    while sum(t.done() for t in tasks) < n and time.monotonic() < deadline:
        pending = [t for t in tasks if not t.done()]
        left = deadline - time.monotonic()
        await asyncio.wait(pending, timeout=left, return_when=asyncio.FIRST_COMPLETED)


async def _read(
    events: AsyncIterator[SseEvent],
    seen: list[SseEvent],
    done: Callable[[list[SseEvent]], bool],
    timeout_s: float = 30,
) -> None:
    """Append events from `events` to `seen` until `done(seen)`."""
    try:
        async with asyncio.timeout(timeout_s):
            while not (seen and done(seen)):
                seen.append(await anext(events))
    except TimeoutError:
        raise AssertionError(f"timed out; got {[(e.id, e.event, e.data) for e in seen]}") from None


def _deltas(events: list[SseEvent]) -> list[str]:
    return [e.data["text"] for e in events if e.event == "message.delta"]


def _completed(events: list[SseEvent]) -> bool:
    return events[-1].event == "turn.completed"


def _assert_consecutive(events: list[SseEvent]) -> None:
    ids = [int(e.id or 0) for e in events]
    assert ids == list(range(ids[0], ids[0] + len(ids))), f"a gap or a duplicate: {ids}"


async def _running_steps(client: httpx.AsyncClient, session_id: str) -> list[str]:
    steps = (await client.get(f"/v1/sessions/{session_id}/steps")).json()["items"]
    return [s["action_type"] for s in steps if s["status"] == "running"]


def _lease(cluster: Cluster, session_id: str) -> tuple[str, int, float]:
    """The session's one lease row, read from the database itself."""
    with psycopg.connect(cluster.database_url) as conn:
        rows = conn.execute(
            "SELECT owner, token, expires_at FROM session_leases WHERE session_id = %s",
            (session_id,),
        ).fetchall()
    assert len(rows) == 1, rows
    owner, token, expires_at = rows[0]
    return str(owner), int(token), float(expires_at)


async def _released(cluster: Cluster, session_id: str) -> tuple[str, int]:
    """(owner, token) of the session's lease once its owner let go (right after answering)."""
    deadline = time.monotonic() + 15
    while True:
        owner, token, expires_at = await asyncio.to_thread(_lease, cluster, session_id)
        if expires_at == 0:
            return owner, token
        assert time.monotonic() < deadline, "the owner never let go of the lease"
        await asyncio.sleep(0.05)


def _pid(owner: str) -> int:
    """The process id in a lease owner `host:pid:random`."""
    return int(owner.split(":")[-2])


def _last_user_text(messages: list[dict[str, object]]) -> object:
    return [m.get("content") for m in messages if m.get("role") == "user"][-1]


def _ended(events: list[SseEvent]) -> bool:
    return events[-1].event in ("turn.completed", "turn.failed")
