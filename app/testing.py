"""Run the real service on 127.0.0.1 inside the current event loop, and read SSE like a browser.

Shared by tests, benchmarks and demos: `async with serve(settings) as svc:` gives a base URL,
the runtime, and an httpx client pointed at a real socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn

from app.api.http_protocol import serving_options
from app.events import TERMINAL_TURN_EVENTS, EventType
from app.llm.gateway import ChatModel
from app.llm.sse import SseParser
from app.main import create_app
from app.runtime import Runtime
from app.settings import Settings


@dataclass
class LiveService:
    base_url: str
    runtime: Runtime
    client: httpx.AsyncClient
    server: uvicorn.Server


@contextlib.asynccontextmanager
async def serve(
    settings: Settings, *, model: ChatModel | None = None
) -> AsyncIterator[LiveService]:
    app = create_app(settings, model=model)
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        log_level="warning",
        lifespan="on",
        loop="asyncio",
        **serving_options(settings),
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError("the service stopped during start-up")
            await asyncio.sleep(0.005)
        port = server.servers[0].sockets[0].getsockname()[1]
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=base, timeout=30.0) as client:
            yield LiveService(base, app.state.runtime, client, server)
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=30)


@dataclass
class SseEvent:
    id: str | None
    event: str
    data: Any
    raw: str = ""


class SseReader:
    """The events of one stream as tests read them: `app.llm.sse`'s parser, data as JSON."""

    def __init__(self) -> None:
        self.parser = SseParser()

    @property
    def comments(self) -> int:
        return self.parser.comments

    def feed(self, chunk: str) -> list[SseEvent]:
        return [SseEvent(e.id, e.event, _json(e.data), e.data) for e in self.parser.feed(chunk)]


def _json(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


async def read_events(
    response: httpx.Response, *, until: str | None = None, limit: int | None = None
) -> AsyncIterator[SseEvent]:
    """Events from a streaming response, ending after an event of type `until` (if given)."""
    reader = SseReader()
    count = 0
    async for chunk in response.aiter_text():
        for event in reader.feed(chunk):
            yield event
            count += 1
            if (until is not None and event.event == until) or (limit and count >= limit):
                return


TERMINAL = TERMINAL_TURN_EVENTS


@contextlib.asynccontextmanager
async def post_message_stream(
    client: httpx.AsyncClient, session_id: str, content: str, **extra: Any
) -> AsyncIterator[httpx.Response]:
    """POST a message with Accept: text/event-stream; the response, its body not yet read."""
    async with client.stream(
        "POST",
        f"/v1/sessions/{session_id}/messages",
        json={"content": content, **extra},
        headers={"Accept": "text/event-stream"},
    ) as response:
        yield response


async def stream_turn(
    client: httpx.AsyncClient,
    session_id: str,
    content: str,
    *,
    decide: str | None = None,
    **extra: Any,
) -> list[SseEvent]:
    """POST a message with Accept: text/event-stream and collect events to the turn's end.
    With `decide` ("approve" or "reject"), every approval the turn waits for is decided over
    the API as an operator would."""
    events: list[SseEvent] = []
    async with post_message_stream(client, session_id, content, **extra) as response:
        if response.status_code != 200:
            await response.aread()
            raise AssertionError(f"{response.status_code}: {response.text}")
        async for event in read_events(response):
            events.append(event)
            if decide is not None and event.event == EventType.APPROVAL_REQUESTED:
                url = f"/v1/sessions/{session_id}/approvals/{event.data['approval_id']}"
                decided = await client.post(url, json={"decision": decide})
                if decided.status_code != 200:
                    raise AssertionError(f"{decided.status_code}: {decided.text}")
            if event.event in TERMINAL:
                break
    return events


async def stream_turn_deciding(
    client: httpx.AsyncClient,
    session_id: str,
    content: str,
    decision: str = "approve",
    **extra: Any,
) -> list[SseEvent]:
    """`stream_turn` deciding every approval (`decision`: "approve" or "reject")."""
    return await stream_turn(client, session_id, content, decide=decision, **extra)
