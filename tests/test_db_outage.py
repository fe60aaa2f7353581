"""PostgreSQL going away under running turns: no customer loses an answer, no side effect repeats.

Two `hermes serve` processes (A, B) share one fresh PostgreSQL database and one Redis key prefix.
A stream of customer turns runs tools with side effects (`query_order_status`, then
`create_ticket` in the demo backend: one ticket per turn); while they run, every connection
Hermes has to that database is ended by the server (`pg_terminate_backend`), several times.
The frontend behaves as a call centre's does: it sends each message with a `client_message_id`
and sends it again when told the database is away (503 `database_unavailable`) or the turn was
interrupted (503 `interrupted`). Then every turn has completed, every customer got the reply
naming their ticket, and each ticket exists exactly once.

(Before the fix, turns whose write met a broken connection ended `failed/internal_error` with
no failed step, and a replay of their message answered 502 every time.)

A second test ends one connection exactly while a turn's last commit is under way, after the
server committed it and before its answer reached Hermes (a proxy swallows the answer): the
turn is not run again or stored twice, and the waiting client gets its reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest

from app.llm.testing import FakeLLMServer, Gate, RecordedRequest, Reply, Step, ToolCall, ToolCalls
from app.settings import Settings
from app.testing import read_events, serve
from tests.conftest import copy_demo
from tests.postgres import fresh_database
from tests.redis_util import REDIS_URL, TcpProxy, key_prefix
from tests.serve_util import free_port, hermes_env, spawn_hermes, stop, wait_healthy

pytestmark = pytest.mark.slow

ORDER = "202405201234"  # the demo customer cust_0001's order
CUSTOMER = "cust_0001"
SESSIONS = 8
TURNS_PER_SESSION = 2
KILLS = 6
_TAG = re.compile(r"\[(s\d+-t\d+)\]")
_TICKET = re.compile(r"TK\d{8}")


# -- the model: answers each request from what is in it ---------------------------------------


def agent(request: RecordedRequest) -> Step | None:
    """Order status, then a ticket, then a reply naming the ticket: decided from the messages of
    the turn (after the customer's tagged message), so a resumed turn's request, which carries
    what the turn stored, is answered where the turn left off. Call ids are fresh each time: a
    model round asked again can never pass for one already run."""
    if not request.tool_names:
        return None  # not a turn's model call (e.g. a summary)
    messages = request.messages
    asked = [i for i, m in enumerate(messages) if m["role"] == "user" and _tag(m)]
    if not asked:
        return None
    tag = _tag(messages[asked[-1]])
    after = messages[asked[-1] + 1 :]
    names = {
        call["id"]: call["function"]["name"]
        for m in after
        if m["role"] == "assistant"
        for call in m.get("tool_calls") or []
    }
    results = {
        names.get(m.get("tool_call_id")): str(m.get("content"))
        for m in after
        if m["role"] == "tool"
    }
    if "query_order_status" not in results:
        call = ToolCall("query_order_status", {"order_id": ORDER}, id=_call_id())
        return ToolCalls(call, delay=0.03)
    if "create_ticket" not in results:
        summary = f"[{tag}] 订单未送达，客户要求跟进处理。"
        arguments = {"category": "complaint", "summary": summary, "order_id": ORDER}
        return ToolCalls(ToolCall("create_ticket", arguments, id=_call_id()), delay=0.03)
    ticket = _TICKET.search(results["create_ticket"])
    text = f"[{tag}] 已为您登记工单 {ticket.group(0) if ticket else '?'}，我们会尽快跟进。"
    return Reply(text, chunks=4, chunk_delay=0.02)


def _tag(message: dict[str, Any]) -> str | None:
    found = _TAG.search(str(message.get("content") or ""))
    return found.group(1) if found else None


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:12]}"


# -- the database's connections, ended by the server ------------------------------------------


def end_hermes_connections(url: str) -> int:
    """`pg_terminate_backend` on every other connection to this test's own database."""
    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(url, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        ).fetchall()
    return sum(1 for (ended,) in rows if ended)


async def kill_while_turns_run(llm: FakeLLMServer, url: str, done: asyncio.Event) -> list[int]:
    """End every Hermes connection `KILLS` times, each once the model has been asked a few more
    times (turns are mid-way: between model calls, tool calls and their writes)."""
    ended: list[int] = []
    seen = len(llm.requests)
    deadline = time.monotonic() + 120
    while len(ended) < KILLS and not done.is_set():
        assert time.monotonic() < deadline, "the turns stopped asking the model"
        if len(llm.requests) >= seen + 5:
            seen = len(llm.requests)
            ended.append(await asyncio.to_thread(end_hermes_connections, url))
        await asyncio.sleep(0.01)
    return ended


# -- the frontend ---------------------------------------------------------------------------


@dataclass
class Frontend:
    """What a call centre's frontend does: each message with a client_message_id, sent again
    while the answer says to (database away, turn interrupted)."""

    clients: list[httpx.AsyncClient]
    resent: dict[str, int] = field(default_factory=dict)  # why a message was sent again

    async def say(self, via: int, session_id: str, text: str, *, stream: bool) -> str:
        cmid = f"m-{uuid.uuid4().hex}"
        for _attempt in range(20):
            outcome = await self._post(self.clients[via], session_id, text, cmid, stream)
            if isinstance(outcome, str):
                return outcome
            self.resent[outcome[0]] = self.resent.get(outcome[0], 0) + 1
            via = 1 - via  # a load balancer may send the retry elsewhere
        raise AssertionError(f"no reply for {text!r} after 20 tries: {self.resent}")

    async def _post(
        self, client: httpx.AsyncClient, session_id: str, text: str, cmid: str, stream: bool
    ) -> str | tuple[str]:
        body = {"content": text, "client_message_id": cmid}
        url = f"/v1/sessions/{session_id}/messages"
        try:
            if not stream:
                response = await client.post(url, json=body)
                if response.status_code == 200:
                    return str(response.json()["message"]["content"])
                return (self._retryable(response.status_code, response.json()),)
            headers = {"Accept": "text/event-stream"}
            async with client.stream("POST", url, json=body, headers=headers) as response:
                if response.status_code != 200:
                    await response.aread()
                    return (self._retryable(response.status_code, response.json()),)
                text_out = None
                async for event in read_events(response, until=("turn.completed", "turn.failed")):
                    if event.event == "message.completed":
                        text_out = str(event.data["text"])
                    if event.event == "turn.failed":
                        return (self._retryable(503, {"error": event.data}),)
                assert text_out is not None
                return text_out
        except httpx.TransportError as exc:
            return (f"transport:{type(exc).__name__}",)

    @staticmethod
    def _retryable(status: int, body: dict[str, Any]) -> str:
        code = str(body["error"]["code"])
        assert (status, code) in ((503, "database_unavailable"), (503, "interrupted")), body
        return code


async def customer(front: Frontend, number: int) -> list[tuple[str, str]]:
    """One customer's session: `TURNS_PER_SESSION` messages, sent through A and B in turn,
    JSON for even customers and SSE for odd ones; (tag, reply) per turn."""
    created = await front.clients[number % 2].post("/v1/sessions", json={"user_id": CUSTOMER})
    assert created.status_code == 201, created.text
    session_id = created.json()["id"]
    replies = []
    for turn in range(TURNS_PER_SESSION):
        tag = f"s{number}-t{turn}"
        text = f"[{tag}] 我的订单 {ORDER} 一直没送到，请帮我登记跟进"
        reply = await front.say((number + turn) % 2, session_id, text, stream=number % 2 == 1)
        replies.append((tag, reply))
    return replies


# -- two processes ----------------------------------------------------------------------------


@dataclass
class Pair:
    llm: FakeLLMServer
    url: str
    bases: list[str]
    demos: list[Path]
    logs: list[Path]


@contextlib.contextmanager
def two_processes(tmp: Path, demo_template: Path) -> Iterator[Pair]:
    with (
        FakeLLMServer(responder=agent) as llm,
        fresh_database() as url,
        key_prefix() as prefix,
    ):
        procs, bases, demos, logs = [], [], [], []
        try:
            for name in "ab":
                port = free_port()
                demo = copy_demo(demo_template, tmp / f"demo-{name}.db")
                env = hermes_env(
                    llm.url,
                    HERMES_DATABASE_URL=url,
                    HERMES_REDIS_URL=REDIS_URL,
                    HERMES_REDIS_PREFIX=prefix,
                    HERMES_LOCAL_FALLBACK="false",
                    HERMES_DEMO_DB_PATH=str(demo),
                    # Every tool offered every turn: the model script, not the NLU, picks them.
                    HERMES_NLU_MIN_CONFIDENCE="1",
                    HERMES_TURN_TIMEOUT_S="60",
                )
                logs.append(tmp / f"{name}.log")
                procs.append(spawn_hermes(["serve", "--port", str(port)], env, logs[-1]))
                bases.append(f"http://127.0.0.1:{port}")
                demos.append(demo)

            async def all_healthy() -> None:
                await asyncio.gather(
                    *(wait_healthy(b, p, log) for b, p, log in zip(bases, procs, logs, strict=True))
                )

            asyncio.run(all_healthy())
            yield Pair(llm, url, bases, demos, logs)
        finally:
            stop(procs)


def tickets(demos: list[Path]) -> dict[str, list[str]]:
    """The tickets this test's turns made, by turn tag, over both processes' demo backends."""
    found: dict[str, list[str]] = {}
    for demo in demos:
        with contextlib.closing(sqlite3.connect(demo)) as conn:
            for ticket_id, summary in conn.execute("SELECT id, summary FROM tickets"):
                tag = _TAG.search(summary or "")
                if tag:
                    found.setdefault(tag.group(1), []).append(ticket_id)
    return found


def test_turns_survive_their_database_connections_being_ended_mid_turn(
    tmp_path: Path, demo_template: Path
) -> None:
    with two_processes(tmp_path, demo_template) as pair:

        async def run() -> tuple[list[list[tuple[str, str]]], list[int], Frontend]:
            clients = [httpx.AsyncClient(base_url=b, timeout=90) for b in pair.bases]
            front = Frontend(clients)
            done = asyncio.Event()
            try:
                killer = asyncio.create_task(kill_while_turns_run(pair.llm, pair.url, done))
                try:
                    replies = await asyncio.gather(*(customer(front, n) for n in range(SESSIONS)))
                finally:
                    done.set()
                ended = await killer
            finally:
                for client in clients:
                    await client.aclose()
            return list(replies), ended, front

        replies, ended, front = asyncio.run(run())

        # The database really went away under running turns, several times.
        assert len(ended) == KILLS and all(n >= 1 for n in ended), ended
        # Every customer got the reply to every message, naming the one ticket of that turn.
        made = tickets(pair.demos)
        for tag, reply in [r for per_session in replies for r in per_session]:
            assert reply.startswith(f"[{tag}]"), (tag, reply)
            assert made.get(tag) is not None and len(made[tag]) == 1, (tag, made.get(tag))
            assert made[tag][0] in reply, (tag, reply, made[tag])
        assert len(made) == SESSIONS * TURNS_PER_SESSION
        with psycopg.connect(pair.url, autocommit=True) as conn:
            turns = conn.execute("SELECT status, error_code FROM turns").fetchall()
            calls = conn.execute(
                "SELECT tool, status, COUNT(*) FROM tool_calls GROUP BY tool, status"
            ).fetchall()
        assert turns and all(status == "completed" for status, _ in turns), turns
        assert len(turns) == SESSIONS * TURNS_PER_SESSION
        # One succeeded, idempotency-keyed call per ticket; none left half-done.
        assert {(tool, status): n for tool, status, n in calls} == {
            ("create_ticket", "succeeded"): SESSIONS * TURNS_PER_SESSION
        }, calls
        # The outage reached Hermes (and was waited out), it was not merely a quiet moment.
        logged = "".join(log.read_text(encoding="utf-8") for log in pair.logs)
        assert "reconnecting" in logged or "running it again on a new connection" in logged
        print(f"connections ended per kill: {ended}; messages sent again: {front.resent}")


# -- a commit's answer lost ------------------------------------------------------------------


class AnswerEater:
    """A TCP proxy to PostgreSQL that, once armed with a marker, lets a client's statement
    containing the marker and the COMMIT after it reach the server, then swallows the server's
    answer to that COMMIT and ends the connection: the commit is applied, its acknowledgement
    lost."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.marker: bytes | None = None
        self.fired = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        sent = b""  # the end of what the client sent (a marker may span two reads)
        answers: bytes | None = None  # what the server said since the marker went by

        def to_server(data: bytes) -> bool:
            nonlocal sent, answers
            sent = (sent + data)[-4096:]
            if self.marker is not None and self.marker in sent:
                self.marker, answers = None, b""  # once
            return False

        def to_client(data: bytes) -> bool:
            # The server's "COMMIT" command-complete tag: its answer to the commit (the client
            # may send the COMMIT as a prepared statement, by name only: it is found here).
            nonlocal answers
            if answers is None:
                return False
            answers = (answers + data)[-4096:]
            if b"COMMIT\x00" in answers:
                self.fired.set()
                return True  # swallowed, the line cut
            return False

        ends = (writer, up_writer)
        for pipe in (
            self._pipe(reader, up_writer, to_server, ends),
            self._pipe(up_reader, writer, to_client, ends),
        ):
            task = asyncio.create_task(pipe)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _pipe(
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        cut: Callable[[bytes], bool],
        ends: tuple[asyncio.StreamWriter, ...],
    ) -> None:
        """Forward until `cut` says so of what arrived."""
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while data := await source.read(65536):
                if cut(data):
                    break
                sink.write(data)
                await sink.drain()
        _close(ends)


def _close(ends: tuple[asyncio.StreamWriter, ...]) -> None:
    for end in ends:
        with contextlib.suppress(Exception):
            end.close()


@contextlib.asynccontextmanager
async def eater_in_front_of(url: str) -> AsyncIterator[tuple[AnswerEater, str]]:
    parts = urlsplit(url)
    eater = AnswerEater(parts.hostname or "127.0.0.1", parts.port or 5432)
    port = await eater.start()
    try:
        yield (
            eater,
            parts._replace(netloc=f"{parts.username or 'postgres'}@127.0.0.1:{port}").geturl(),
        )
    finally:
        await eater.close()


async def test_a_turn_whose_last_commit_lost_its_answer_is_stored_once_and_answered(
    make_settings: Callable[..., Settings], fake_llm: FakeLLMServer
) -> None:
    with fresh_database() as url:
        async with eater_in_front_of(url) as (eater, proxied):
            fake_llm.enqueue(Reply("the one and only reply"))
            async with serve(make_settings(database_url=proxied)) as svc:
                created = await svc.client.post("/v1/sessions", json={"user_id": "u1"})
                session_id = created.json()["id"]
                # The turn's end: its final message, stored with `status = 'completed'`.
                eater.marker = b"status = 'completed'"
                answered = await svc.client.post(
                    f"/v1/sessions/{session_id}/messages",
                    json={"content": "hello", "client_message_id": "once"},
                    timeout=60,
                )
                assert eater.fired.is_set()  # the answer of that commit never reached Hermes
                assert answered.status_code == 200, answered.text
                assert answered.json()["message"]["content"] == "the one and only reply"

                messages = (await svc.client.get(f"/v1/sessions/{session_id}/messages")).json()
                assert [(m["role"], m["content"]) for m in messages["items"]] == [
                    ("user", "hello"),
                    ("assistant", "the one and only reply"),
                ]
                assert len(fake_llm.requests) == 1  # the turn was not run again
                replay = await svc.client.post(
                    f"/v1/sessions/{session_id}/messages",
                    json={"content": "hello", "client_message_id": "once"},
                )
                assert replay.status_code == 200
                assert replay.json()["message"]["content"] == "the one and only reply"
        with psycopg.connect(url, autocommit=True) as conn:
            (ended,) = conn.execute(
                "SELECT COUNT(*) FROM events WHERE type = 'turn.completed'"
            ).fetchone() or (0,)
        assert ended == 1


# -- a database away for a while -----------------------------------------------------------


@contextlib.asynccontextmanager
async def cut_off_database() -> AsyncIterator[tuple[str, str, TcpProxy]]:
    """A fresh database, and a URL to it through a proxy that can cut it off: (its own URL,
    the proxied URL, the proxy)."""
    with fresh_database() as url:
        parts = urlsplit(url)
        proxy = TcpProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
        port = await proxy.start()
        netloc = f"{parts.username or 'postgres'}@127.0.0.1:{port}"
        try:
            yield url, parts._replace(netloc=netloc).geturl(), proxy
        finally:
            await proxy.close()


async def post_through_an_outage(
    svc: Any,
    session_id: str,
    body: dict[str, Any],
    proxy: TcpProxy,
    gate: Gate,
    caplog: pytest.LogCaptureFixture,
    back_once_logged: str,
) -> httpx.Response:
    """POST `body`; while the model streams its reply (held at `gate`), the database is cut
    off; it comes back once a log record says `back_once_logged`. The POST's answer."""
    waiting = asyncio.create_task(
        svc.client.post(f"/v1/sessions/{session_id}/messages", json=body, timeout=60)
    )
    await until_true(lambda: gate.reached)
    await proxy.cut()
    gate.open()
    await until_true(
        lambda: any(back_once_logged in r.getMessage() for r in caplog.records), timeout_s=30
    )
    await proxy.restore()
    return await waiting


async def test_a_turn_whose_database_stays_away_ends_interrupted_and_its_replay_finishes_it(
    make_settings: Callable[..., Settings],
    fake_llm: FakeLLMServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("WARNING", logger="app.storage.outage")
    async with cut_off_database() as (_url, proxied, proxy):
        gate = Gate(after=1)
        fake_llm.enqueue(Reply("lost with its database", chunks=2, gate=gate), Reply("resumed"))
        async with serve(make_settings(database_url=proxied, turn_timeout_s=3)) as svc:
            created = await svc.client.post("/v1/sessions", json={"user_id": "u1"})
            session_id = created.json()["id"]
            body = {"content": "hello", "client_message_id": "cm-away"}
            # The turn's time runs out while the database is away; its end waits to be stored.
            answered = await post_through_an_outage(
                svc, session_id, body, proxy, gate, caplog, "the end of turn"
            )
            assert answered.status_code == 503, answered.text
            assert answered.json()["error"]["code"] == "interrupted"
            steps = (await svc.client.get(f"/v1/sessions/{session_id}/steps")).json()
            failed = [s for s in steps["items"] if s["status"] == "failed"]
            assert [s["error"]["code"] for s in failed] == ["database_unavailable"]

            url_messages = f"/v1/sessions/{session_id}/messages"
            again = await svc.client.post(url_messages, json=body)
            assert again.status_code == 200, again.text
            assert again.json()["message"]["content"] == "resumed"
            messages = (await svc.client.get(url_messages)).json()["items"]
            assert [(m["role"], m["content"]) for m in messages] == [
                ("user", "hello"),
                ("assistant", "resumed"),
            ]


async def until_true(check: Callable[[], bool], timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def test_a_turn_whose_database_comes_back_resumes_in_place_and_runs_no_tool_twice(
    make_settings: Callable[..., Settings],
    fake_llm: FakeLLMServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("WARNING", logger="app.conversation.manager")
    async with cut_off_database() as (url, proxied, proxy):
        gate = Gate(after=1)
        summary = "[in-place] 订单未送达，客户要求跟进处理。"
        ticket = {"category": "complaint", "summary": summary, "order_id": ORDER}
        fake_llm.enqueue(
            ToolCalls(ToolCall("create_ticket", ticket, id="call_ticket")),
            Reply("lost with its database", chunks=2, gate=gate),
            Reply("answered after the outage"),
        )
        settings = make_settings(database_url=proxied, nlu_min_confidence=1)
        async with serve(settings) as svc:
            created = await svc.client.post("/v1/sessions", json={"user_id": CUSTOMER})
            session_id = created.json()["id"]
            body = {"content": "我的订单一直没到，请登记", "client_message_id": "cm-back"}
            # The database goes away while the model writes the reply, for longer than the
            # writer's own retries: the turn meets it, waits, and goes on when it is back.
            answered = await post_through_an_outage(
                svc, session_id, body, proxy, gate, caplog, "lost its database"
            )
            assert answered.status_code == 200, answered.text
            assert answered.json()["message"]["content"] == "answered after the outage"
            assert len(fake_llm.requests) == 3  # the reply's model call again, nothing else
            steps = (await svc.client.get(f"/v1/sessions/{session_id}/steps")).json()
            tools = [s for s in steps["items"] if s["action_type"] == "call_tool"]
            assert [(s["name"], s["status"], s["attempts"]) for s in tools] == [
                ("create_ticket", "succeeded", 1)
            ]
        with contextlib.closing(sqlite3.connect(settings.demo.db_path)) as demo:
            made = demo.execute("SELECT COUNT(*) FROM tickets WHERE summary = ?", (summary,))
            assert made.fetchone() == (1,)
        with psycopg.connect(url, autocommit=True) as conn:
            started = conn.execute(
                "SELECT e.data FROM events e JOIN sessions s ON s.session_key = e.session_key"
                " WHERE s.id = %s AND e.type = 'turn.started' ORDER BY e.seq",
                (session_id,),
            ).fetchall()
        assert len(started) == 2 and '"resumed_from_step"' in started[1][0], started
