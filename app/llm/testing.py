"""Test doubles for the LLM seam, kept in the package so tests, benchmarks and demos share them.

`FakeLLMServer` is a real OpenAI-compatible chat-completions server on 127.0.0.1, so the
direct client's and LiteLLM's own HTTP and streaming code run against it. Each model name has
its own script of steps; when a script is empty the server asks its responder, if it has one
(e.g. the rule-based `app.llm.testing_rules.RuleModel`, which answers each request from its own
messages), and otherwise falls back to its default step (a short text reply).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from app.errors import InternalError

# ---------------------------------------------------------------------------------------------
# Script steps


@dataclass(frozen=True)
class ToolCall:
    name: str
    # A dict is JSON-encoded; a str is sent verbatim (used to script malformed arguments).
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None


class Gate:
    """Holds a streamed `Reply` after its first `after` pieces until `open()`, so a test sees a
    turn in flight, part of its text out, for as long as it needs: no timing involved. Works
    across threads (the fake server runs its own event loop); after `timeout_s` closed, the
    reply goes on anyway, so a failed test cannot hang on it."""

    def __init__(self, after: int, timeout_s: float = 60.0) -> None:
        self.after = after
        self.timeout_s = timeout_s
        self._reached = threading.Event()
        self._opened = threading.Event()

    @property
    def reached(self) -> bool:
        """The reply got to the gate (its first `after` pieces are out)."""
        return self._reached.is_set()

    def open(self) -> None:
        self._opened.set()

    async def passage(self) -> None:
        self._reached.set()
        await asyncio.to_thread(self._opened.wait, self.timeout_s)


@dataclass(frozen=True)
class Reply:
    """A text answer, streamed in `chunks` pieces with `chunk_delay` seconds between them (and
    held at `gate`, if given, after its first `gate.after` pieces)."""

    text: str
    chunks: int | None = None
    chunk_delay: float = 0.0
    delay: float = 0.0
    usage: tuple[int, int] = (10, 5)
    gate: Gate | None = None

    async def pieces(self) -> AsyncIterator[str]:
        """The streamed pieces, paced by `chunk_delay` and `gate`."""
        for i, piece in enumerate(_split(self.text, self.chunks)):
            if i and self.chunk_delay:
                await asyncio.sleep(self.chunk_delay)
            if self.gate is not None and i == self.gate.after:
                await self.gate.passage()
            yield piece


@dataclass(frozen=True)
class ToolCalls:
    """A response asking for tools; `usage` is the (prompt, completion) tokens it reports."""

    calls: tuple[ToolCall, ...]
    text: str = ""
    delay: float = 0.0
    usage: tuple[int, int] = (10, 5)

    def __init__(
        self,
        *calls: ToolCall,
        text: str = "",
        delay: float = 0.0,
        usage: tuple[int, int] = (10, 5),
    ) -> None:
        object.__setattr__(self, "calls", tuple(calls))
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "delay", delay)
        object.__setattr__(self, "usage", usage)


@dataclass(frozen=True)
class Fail:
    """An HTTP error answer (429, 500, ...)."""

    status: int = 500
    message: str = "scripted failure"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass(frozen=True)
class Hang:
    """Never answer: the caller's timeout has to end the request."""

    seconds: float = 3600.0


@dataclass(frozen=True)
class BreakStream:
    """Stream `text` and then drop the connection without finishing the response."""

    text: str = "partial "


@dataclass(frozen=True)
class MalformedStream:
    """Stream `text` (if any), then an event whose data is not valid JSON, then end as usual."""

    text: str = ""
    data: str = '{"choices": [{"index": 0, "delta": {"content": "cut'


Step = Reply | ToolCalls | Fail | Hang | BreakStream | MalformedStream


@dataclass
class RecordedRequest:
    model: str
    body: dict[str, Any]
    at: float
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))

    @property
    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in self.body.get("tools") or []]


# Answers a request from what is in it (its messages, the tools offered), when no script step
# is waiting: one server can then serve many sessions at once, as under load, where a shared
# queue of steps would hand one session's answer to another. None falls back to the default.
Responder = Callable[[RecordedRequest], "Step | None"]


# ---------------------------------------------------------------------------------------------
# The server


class FakeLLMServer:
    """An OpenAI-compatible `/v1/chat/completions` server with per-model scripts.

    Use it as a context manager or call `start()`/`stop()`. `url` is the API base to give
    `openai/<model>` models (`HERMES_MODEL_API_BASE`).
    """

    def __init__(self, default: Step | None = None, responder: Responder | None = None) -> None:
        self._initial_default: Step = default or Reply("Hello from the fake model.")
        self.default: Step = self._initial_default
        self._initial_responder = responder
        self.responder: Responder | None = responder
        self.requests: list[RecordedRequest] = []
        self._scripts: dict[str, deque[Step]] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._server: uvicorn.Server | None = None
        self.port = 0

    # -- scripting ----------------------------------------------------------------------------

    def enqueue(self, *steps: Step, model: str = "*") -> None:
        """Append steps to `model`'s script; `*` is the script every model shares."""
        with self._lock:
            self._scripts.setdefault(model, deque()).extend(steps)

    def pending(self, model: str = "*") -> int:
        with self._lock:
            return len(self._scripts.get(model, ()))

    def reset(self) -> None:
        """Forget scripts, recorded requests and any default or responder set since start."""
        with self._lock:
            self._scripts.clear()
            self.requests.clear()
            self.default = self._initial_default
            self.responder = self._initial_responder

    def requests_for(self, model: str) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.model == model]

    def _next_step(self, request: RecordedRequest) -> Step:
        with self._lock:
            for key in (request.model, "*"):
                script = self._scripts.get(key)
                if script:
                    return script.popleft()
            responder, default = self.responder, self.default
        answer = responder(request) if responder is not None else None
        return default if answer is None else answer

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeLLMServer:
        app = Starlette(routes=[Route("/v1/chat/completions", self._handle, methods=["POST"])])
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", lifespan="off", loop="asyncio"
        )
        server = uvicorn.Server(config)
        self._server = server
        self._thread = threading.Thread(target=server.run, name="fake-llm", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("fake LLM server did not start")
            time.sleep(0.005)
        self.port = server.servers[0].sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            self._server.force_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- HTTP ---------------------------------------------------------------------------------

    async def _handle(self, request: Request) -> Response:
        body = await request.json()
        model = str(body.get("model", ""))
        recorded = RecordedRequest(model, body, time.time(), dict(request.headers.items()))
        with self._lock:
            self.requests.append(recorded)
        step = self._next_step(recorded)
        stream = bool(body.get("stream"))

        if isinstance(step, Hang):
            await asyncio.sleep(step.seconds)
            return JSONResponse({"error": {"message": "hung"}}, status_code=504)
        delay = getattr(step, "delay", 0.0)
        if delay:
            await asyncio.sleep(delay)
        if isinstance(step, Fail):
            payload = {"error": {"message": step.message, "type": "server_error", "code": None}}
            return JSONResponse(payload, status_code=step.status, headers=step.headers)
        if stream:
            return StreamingResponse(
                _sse(_stream_chunks(model, step)), media_type="text/event-stream"
            )
        if isinstance(step, BreakStream | MalformedStream):
            return Response(b'{"choices": [', media_type="application/json")
        return JSONResponse(_full_response(model, step))


def _completion_id() -> str:
    return "chatcmpl-" + uuid.uuid4().hex


def _split(text: str, pieces: int | None) -> list[str]:
    if not text:
        return []
    if not pieces:
        # Roughly one chunk per word, as real servers stream tokens.
        words, out = text.split(" "), []
        for i, word in enumerate(words):
            out.append(word if i == len(words) - 1 else word + " ")
        return [w for w in out if w]
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _tool_call_payload(call: ToolCall, index: int) -> dict[str, Any]:
    args = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
    return {
        "index": index,
        "id": call.id or f"call_{uuid.uuid4().hex[:12]}",
        "type": "function",
        "function": {"name": call.name, "arguments": args},
    }


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _full_response(model: str, step: Reply | ToolCalls | BreakStream) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None}
    finish = "stop"
    if isinstance(step, ToolCalls):
        message["content"] = step.text or None
        message["tool_calls"] = [_tool_call_payload(c, i) for i, c in enumerate(step.calls)]
        for call in message["tool_calls"]:
            call.pop("index")
        finish = "tool_calls"
    else:
        message["content"] = step.text
    usage = step.usage if isinstance(step, Reply | ToolCalls) else (10, 5)
    return {
        "id": _completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": _usage(*usage),
    }


async def _stream_chunks(model: str, step: Step) -> AsyncIterator[dict[str, Any] | str | None]:
    cid, created = _completion_id(), int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    yield chunk({"role": "assistant", "content": ""})
    if isinstance(step, BreakStream):
        yield chunk({"content": step.text})
        yield None  # tells _sse to drop the connection
        return
    if isinstance(step, MalformedStream):
        if step.text:
            yield chunk({"content": step.text})
        yield step.data  # sent as the event's data verbatim
        yield chunk({}, "stop")
        return
    if isinstance(step, Reply):
        async for piece in step.pieces():
            yield chunk({"content": piece})
        final = chunk({}, "stop")
        final["usage"] = _usage(*step.usage)
        yield final
        return
    assert isinstance(step, ToolCalls)
    if step.text:
        yield chunk({"content": step.text})
    for index, call in enumerate(step.calls):
        payload = _tool_call_payload(call, index)
        args = payload["function"]["arguments"]
        # Real servers send the name first and the arguments in fragments.
        head = dict(payload, function={"name": call.name, "arguments": ""})
        yield chunk({"tool_calls": [head]})
        half = len(args) // 2
        for piece in (args[:half], args[half:]):
            if piece:
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    final = chunk({}, "tool_calls")
    final["usage"] = _usage(*step.usage)
    yield final


class _DropConnection(InternalError):
    pass


async def _sse(chunks: AsyncIterator[dict[str, Any] | str | None]) -> AsyncIterator[bytes]:
    async for item in chunks:
        if item is None:
            raise _DropConnection
        data = item if isinstance(item, str) else json.dumps(item)
        yield f"data: {data}\n\n".encode()
    yield b"data: [DONE]\n\n"


def texts(steps: Iterable[Step]) -> list[str]:
    """The reply texts of a script, for assertions."""
    return [s.text for s in steps if isinstance(s, Reply)]


@contextlib.contextmanager
def fake_llm(*steps: Step, default: Step | None = None) -> Any:
    """`with fake_llm(Reply("hi")) as server:` for short tests and demos."""
    server = FakeLLMServer(default=default).start()
    server.enqueue(*steps)
    try:
        yield server
    finally:
        server.stop()


# ---------------------------------------------------------------------------------------------
# An in-process double of the ChatModel seam, for tests that don't need HTTP.


class ScriptedLLM:
    """`ChatModel` that plays scripted steps without any network; records each request as it
    was sent (its messages copied: the loop goes on appending to the list it passed)."""

    def __init__(self, *steps: Step, default: Step | None = None) -> None:
        self._steps: deque[Step] = deque(steps)
        self.default: Step = default or Reply("scripted reply")
        self.requests: list[Any] = []

    def enqueue(self, *steps: Step) -> None:
        self._steps.extend(steps)

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        from app.errors import UpstreamLLMError
        from app.llm.gateway import StreamEnd, TextDelta, ToolCallDelta

        self.requests.append(replace(request, messages=list(request.messages)))
        step = self._steps.popleft() if self._steps else self.default
        if isinstance(step, Hang):
            await asyncio.sleep(step.seconds)
        if getattr(step, "delay", 0.0):
            await asyncio.sleep(step.delay)  # type: ignore[union-attr]
        if isinstance(step, Fail):
            code = "llm_rate_limited" if step.status == 429 else "llm_unavailable"
            raise UpstreamLLMError(step.message, code=code)
        if isinstance(step, BreakStream):
            yield TextDelta(step.text)
            raise UpstreamLLMError("stream broke", code="llm_stream_interrupted")
        if isinstance(step, MalformedStream):
            if step.text:
                yield TextDelta(step.text)
            raise UpstreamLLMError("malformed stream", code="llm_unavailable")
        if isinstance(step, Reply):
            async for piece in step.pieces():
                yield TextDelta(piece)
            yield StreamEnd("stop", "scripted", *step.usage)
            return
        assert isinstance(step, ToolCalls)
        if step.text:
            yield TextDelta(step.text)
        for index, call in enumerate(step.calls):
            payload = _tool_call_payload(call, index)
            yield ToolCallDelta(index, payload["id"], call.name, payload["function"]["arguments"])
        yield StreamEnd("tool_calls", "scripted", *step.usage)

    async def aclose(self) -> None:
        return None
